"""Artifact, parameter and property keys of the ChampionModel component."""

CHAMPION_KEY = "champion"
STATISTICS_KEY = "champion_statistics"  # statistics of the champion's training data (drift baseline)
SERVING_DIR_KEY = "serving_dir"
REGISTERED_MODEL_KEY = "registered_model_name"
MLFLOW_TRACKING_URI_KEY = "mlflow_tracking_uri"
MLFLOW_POLICY_KEY = "mlflow_unreachable"  # fail | continue (see torchtfx.components.shared.mlflow_client)

SERVING_VERSION_PROPERTY = "serving_version"
REGISTRY_VERSION_PROPERTY = "registry_version"
SOURCE_PROPERTY = "champion_source"
