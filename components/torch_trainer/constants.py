"""Artifact and parameter keys of the TorchTrainer component; what other components read is in
``components.shared.contracts``."""

# Artifact keys
EXAMPLES_KEY = "examples"
TRANSFORM_GRAPH_KEY = "transform_graph"
MODEL_KEY = "model"
MODEL_RUN_KEY = "model_run"
# Parameter keys (the dataset config, MLflow URI and policy keys are shared: see contracts)
HPARAMS_KEY = "hyperparameters"
MLFLOW_EXPERIMENT_KEY = "mlflow_experiment"
PARITY_TOLERANCE_KEY = "parity_tolerance"
# JSON PyTorchJobSettings when training spans several nodes (Kubeflow Training Operator); "" trains in-process.
PYTORCHJOB_KEY = "pytorchjob"
# <pipeline root>/logs: where a failed run leaves its training log (run_logs.py); "" derives it from the Model
# artifact's URI (LocalDagRunner's layout).
LOG_ROOT_KEY = "log_root"
# TF Serving's max_batch_size (the batching settings): the served model is also run at that batch size.
SERVING_BATCH_KEY = "serving_batch_size"

# Largest |SavedModel - PyTorch| probability difference on the eval split that the parity gate accepts.
DEFAULT_PARITY_TOLERANCE = 1e-5
