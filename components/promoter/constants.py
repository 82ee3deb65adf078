"""Artifact, parameter and property keys of the Promoter component."""

MODEL_KEY = "model"
BLESSING_KEY = "model_blessing"
EVALUATION_KEY = "evaluation"
EXAMPLES_KEY = "examples"
STATISTICS_KEY = "statistics"  # the training data's statistics: the next runs' drift baseline
PUSHED_MODEL_KEY = "pushed_model"

SERVING_DIR_KEY = "serving_dir"
SERVING_MODEL_NAME_KEY = "serving_model_name"
REGISTERED_MODEL_KEY = "registered_model_name"
MLFLOW_TRACKING_URI_KEY = "mlflow_tracking_uri"
CODE_VERSION_KEY = "code_version"
BATCHING_KEY = "batching_parameters"

# Same property names as TFX's Pusher, so tools that read PushedModel artifacts keep working.
# Registry tag: where the statistics of a version's training data live (ChampionModel reads it back).
TRAIN_STATISTICS_TAG = "train_statistics_uri"
PUSHED_PROPERTY = "pushed"
PUSHED_DESTINATION_PROPERTY = "pushed_destination"
PUSHED_VERSION_PROPERTY = "pushed_version"
REJECTION_PROPERTY = "rejection_reasons"
