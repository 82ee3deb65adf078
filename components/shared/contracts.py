"""The contracts between components, each defined here and nowhere else.

- the ids of the pipeline's nodes (``create_pipeline`` assigns them; the CLI summary, the Kubeflow compiler and
  the benchmarks look nodes up by them);
- the Model artifact's layout, which the TorchTrainer writes and the Promoter, the benchmarks and ML tooling read;
- the ModelRun artifact's files;
- execution-parameter keys and custom-property names that more than one component reads;
- how a dataset's pipeline, MLflow experiment and registered model are named.

Plain constants and path helpers only (no TFX import): the DDP workers, which never import TensorFlow, use it too.
"""

from __future__ import annotations

from pathlib import Path

# -- node ids ---------------------------------------------------------------------------------------------
EXAMPLE_GEN_ID = "CsvExampleGen"
STATISTICS_GEN_ID = "StatisticsGen"
SCHEMA_GEN_ID = "ImportSchemaGen"
EXAMPLE_VALIDATOR_ID = "ExampleValidator"
DATA_GATE_ID = "DataGate"
TRANSFORM_ID = "Transform"
TRAINER_ID = "TorchTrainer"
CHAMPION_ID = "ChampionModel"
EVALUATOR_ID = "Evaluator"
PROMOTER_ID = "Promoter"
# Steps that talk to the MLflow server (they get its credentials on Kubeflow; the others do not).
MLFLOW_STEP_IDS = (CHAMPION_ID, TRAINER_ID, PROMOTER_ID)

# -- the Model artifact -------------------------------------------------------------------------------------
# <model uri>/Format-Serving/            the SavedModel (TFX's path_utils.serving_model_dir; a test checks they agree)
# <model uri>/export/state_dict.pt       the trained PyTorch weights (torch.load(weights_only=True))
# <model uri>/export/model.onnx          the ONNX export the SavedModel was converted from
# <model uri>/export/layout.json         the FeatureLayout: which transformed columns the network reads, in order
SERVING_MODEL_SUBDIR = "Format-Serving"
EXPORT_SUBDIR = "export"
STATE_DICT_FILE = "state_dict.pt"
ONNX_FILE = "model.onnx"
LAYOUT_FILE = "layout.json"


def export_dir(model_uri: str | Path) -> Path:
    return Path(model_uri) / EXPORT_SUBDIR


def onnx_path(model_uri: str | Path) -> Path:
    return export_dir(model_uri) / ONNX_FILE


def state_dict_path(model_uri: str | Path) -> Path:
    return export_dir(model_uri) / STATE_DICT_FILE


MLFLOW_MODEL_SUBDIR = "mlflow_model"  # the MLflow Model (pyfunc) that the Promoter registers


def mlflow_model_dir(model_uri: str | Path) -> Path:
    return Path(model_uri) / MLFLOW_MODEL_SUBDIR


def layout_path(model_uri: str | Path) -> Path:
    return export_dir(model_uri) / LAYOUT_FILE


# -- the ModelRun artifact ----------------------------------------------------------------------------------
TRAIN_LOG_FILE = "train.log"
HISTORY_FILE = "history.json"
CURVES_FILE = "training_curves.png"
CHECKPOINT_FILE = "checkpoint.pt"
RESULT_FILE = "result.json"
MLFLOW_RUN_ID_FILE = "mlflow_run_id"

# -- execution parameters read by more than one component ---------------------------------------------------
DATASET_CONFIG_KEY = "dataset_config"  # the DatasetConfig as JSON: Transform's custom_config and the Trainer's
MLFLOW_TRACKING_URI_KEY = "mlflow_tracking_uri"
MLFLOW_POLICY_KEY = "mlflow_unreachable"  # fail | continue (components.shared.mlflow_client)
SERVING_DIR_KEY = "serving_dir"
REGISTERED_MODEL_KEY = "registered_model_name"

# -- custom properties read across components ---------------------------------------------------------------
# On the Model artifact (written by the TorchTrainer; read by the Promoter and the run summary).
PARITY_PROPERTY = "parity_max_abs_diff"  # as text: MLMD's sqlite store keeps doubles to 6 decimal places
MLFLOW_RUN_ID_PROPERTY = "mlflow_run_id"
EVAL_METRIC_PROPERTY_PREFIX = "torch_eval_"  # + the task's training metric: auc, accuracy, rmse, mae
EVAL_AUC_PROPERTY = EVAL_METRIC_PROPERTY_PREFIX + "auc"
TASK_PROPERTY = "task"  # binary, multiclass or regression
SERVING_PRECISION_PROPERTY = "serving_precision"  # the precision of the network in Format-Serving: fp32 or fp16
PRECISION_DRIFT_PROPERTY = "precision_drift"  # the reduced-precision variant's drift figures, as JSON
NUM_WORKERS_PROPERTY = "ddp_world_size"
MODEL_FACTORY_PROPERTY = "model_factory"
CONVERSION_PROPERTY = "onnx_conversion"  # "<strategy>; repairs: <names>"
# The output splits of ExampleGen (the dataset config's split: exactly these two). For a dataset of spans the eval
# split holds the newest span alone, and the train split the window (components/csv_input/span_store.py).
TRAIN_SPLIT = "train"
EVAL_SPLIT = "eval"
# Rows refused for their label (left out of training and evaluation), by split, as JSON: {"eval": 3, "train": 7};
# absent where no row can be refused (a binary label whose columns the schema requires, or label.missing: negative).
LABEL_REFUSED_PROPERTY = "label_refused_rows"
# On the PushedModel artifact: TFX Pusher's names and types (pushed: int, the others strings).
PUSHED_PROPERTY = "pushed"
PUSHED_DESTINATION_PROPERTY = "pushed_destination"
PUSHED_VERSION_PROPERTY = "pushed_version"
REJECTION_PROPERTY = "rejection_reasons"
# 1 when the stable/canary labels wait for `torchtfx promote --finish` (no server address to confirm the load)
LABELS_PENDING_PROPERTY = "labels_pending"
# The candidate's model fingerprint (components.tf_serving.fingerprint), whatever the outcome.
MODEL_FINGERPRINT_PROPERTY = "model_fingerprint"
# A candidate identical to a version already in the registry (the champion, a rolled-back version, the rejected
# challenger): nothing pushed or registered. The sentence that says so, and that version's serving version.
UNCHANGED_PROPERTY = "unchanged"
IDENTICAL_TO_PROPERTY = "identical_to_serving_version"
# On ChampionModel's Model artifact (the Evaluator's baseline): the champion's registry version, as text. The
# Promoter promotes only over that champion (it may have moved while the run evaluated).
CHAMPION_REGISTRY_VERSION_PROPERTY = "registry_version"
# On the ModelBlessing artifact (TFX's Evaluator writes it).
BLESSED_PROPERTY = "blessed"
# Registry tag: where the statistics of a version's training data live (the Promoter writes, ChampionModel reads).
TRAIN_STATISTICS_TAG = "train_statistics_uri"
# Registry tag: the version's model fingerprint (the Promoter writes it on every registration and compares it).
MODEL_FINGERPRINT_TAG = "model_fingerprint"


# -- naming -------------------------------------------------------------------------------------------------
def pipeline_name(dataset_name: str) -> str:
    """The pipeline's name; also its MLflow experiment and its registered model (whose aliases say who serves)."""
    return f"torchtfx-{dataset_name}"
