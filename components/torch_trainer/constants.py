"""Artifact, parameter and custom-property keys of the TorchTrainer component."""

# Artifact keys
EXAMPLES_KEY = "examples"
TRANSFORMED_EXAMPLES_KEY = "transformed_examples"
TRANSFORM_GRAPH_KEY = "transform_graph"
MODEL_KEY = "model"
MODEL_RUN_KEY = "model_run"
# Parameter keys
DATASET_CONFIG_KEY = "dataset_config"
HPARAMS_KEY = "hyperparameters"
MLFLOW_TRACKING_URI_KEY = "mlflow_tracking_uri"
MLFLOW_EXPERIMENT_KEY = "mlflow_experiment"
MLFLOW_POLICY_KEY = "mlflow_unreachable"  # fail | continue (see tracking.py)
PARITY_TOLERANCE_KEY = "parity_tolerance"
# JSON PyTorchJobSettings when training spans several nodes (Kubeflow Training Operator); "" trains in-process.
PYTORCHJOB_KEY = "pytorchjob"
# Custom properties recorded on the Model artifact
PARITY_PROPERTY = "parity_max_abs_diff"
MLFLOW_RUN_ID_PROPERTY = "mlflow_run_id"
EVAL_AUC_PROPERTY = "torch_eval_auc"
NUM_WORKERS_PROPERTY = "ddp_world_size"
