"""Artifact and parameter keys of the Promoter component; the PushedModel's property names (TFX Pusher's),
the registry tags and the keys it shares with other components are in ``components.shared.contracts``."""

from tfx.types import standard_component_specs

# TFX's Pusher keys for what the Pusher executor's methods read (model, blessing, pushed model).
MODEL_KEY = standard_component_specs.MODEL_KEY
BLESSING_KEY = standard_component_specs.MODEL_BLESSING_KEY
EVALUATION_KEY = "evaluation"
EXAMPLES_KEY = "examples"
STATISTICS_KEY = "statistics"  # the training data's statistics: the next runs' drift baseline
CHAMPION_KEY = "champion"  # ChampionModel's Model: the champion the Evaluator compared with (none on a first run)
PUSHED_MODEL_KEY = standard_component_specs.PUSHED_MODEL_KEY

SERVING_MODEL_NAME_KEY = "serving_model_name"
CODE_VERSION_KEY = "code_version"
BATCHING_KEY = "batching_parameters"
SERVING_ADDRESS_KEY = "serving_address"  # TF Serving's gRPC host:port; "" when none is known
LOAD_TIMEOUT_KEY = "serving_load_timeout_s"
CONFIRM_LABELS_KEY = "confirm_labels"  # confirmation.py: STAGED (the default) or IMMEDIATE
