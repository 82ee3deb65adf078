"""TorchTrainer: a TFX component that trains a PyTorch model with DDP on ExampleGen's examples run through
Transform's graph, exports ONNX, converts it to a TF SavedModel carrying the TFT graph, and proves numeric
parity."""

from __future__ import annotations

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ExecutionParameter

from torchtfx.components.shared.contracts import DATASET_CONFIG_KEY, MLFLOW_POLICY_KEY, MLFLOW_TRACKING_URI_KEY
from torchtfx.components.shared.mlflow_client import FAIL_IF_UNREACHABLE
from torchtfx.components.torch_trainer import executor
from torchtfx.components.torch_trainer.constants import (
    DEFAULT_PARITY_TOLERANCE,
    EXAMPLES_KEY,
    HPARAMS_KEY,
    LOG_ROOT_KEY,
    MLFLOW_EXPERIMENT_KEY,
    MODEL_KEY,
    MODEL_RUN_KEY,
    PARITY_TOLERANCE_KEY,
    PYTORCHJOB_KEY,
    SERVING_BATCH_KEY,
    TRANSFORM_GRAPH_KEY,
)
from torchtfx.components.torch_trainer.run_logs import log_root_for


class TorchTrainerSpec(types.ComponentSpec):
    INPUTS = {
        EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples),
        TRANSFORM_GRAPH_KEY: ChannelParameter(type=standard_artifacts.TransformGraph),
    }
    OUTPUTS = {
        MODEL_KEY: ChannelParameter(type=standard_artifacts.Model),
        MODEL_RUN_KEY: ChannelParameter(type=standard_artifacts.ModelRun),
    }
    PARAMETERS = {
        DATASET_CONFIG_KEY: ExecutionParameter(type=str),
        HPARAMS_KEY: ExecutionParameter(type=str),
        # Only the default local store's URI: MLFLOW_TRACKING_URI in the environment overrides it,
        # so a remote server's address and credentials never land in the pipeline spec.
        MLFLOW_TRACKING_URI_KEY: ExecutionParameter(type=str),
        MLFLOW_EXPERIMENT_KEY: ExecutionParameter(type=str),
        PARITY_TOLERANCE_KEY: ExecutionParameter(type=float),
        PYTORCHJOB_KEY: ExecutionParameter(type=str, optional=True),
        MLFLOW_POLICY_KEY: ExecutionParameter(type=str, optional=True),
        LOG_ROOT_KEY: ExecutionParameter(type=str, optional=True),
        SERVING_BATCH_KEY: ExecutionParameter(type=int, optional=True),
    }


class TorchTrainer(base_component.BaseComponent):
    SPEC_CLASS = TorchTrainerSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(
        self,
        examples: types.BaseChannel,
        transform_graph: types.BaseChannel,
        dataset_config_json: str,
        hyperparameters_json: str,
        mlflow_tracking_uri: str,
        mlflow_experiment: str,
        parity_tolerance: float = DEFAULT_PARITY_TOLERANCE,
        pytorchjob_json: str = "",
        mlflow_unreachable: str = FAIL_IF_UNREACHABLE,
        pipeline_root: str = "",
        serving_batch_size: int = 0,
    ) -> None:
        """``pipeline_root``: a failed run's training log is kept in ``<pipeline_root>/logs/<run id>/`` (TFX
        deletes the failed execution's outputs); "" derives the root from the Model artifact's URI.
        ``serving_batch_size``: TF Serving's max_batch_size, one of the sizes the served model is checked at (0: the
        batching default)."""
        spec = TorchTrainerSpec(
            examples=examples,
            transform_graph=transform_graph,
            model=types.Channel(type=standard_artifacts.Model),
            model_run=types.Channel(type=standard_artifacts.ModelRun),
            **{
                DATASET_CONFIG_KEY: dataset_config_json,
                HPARAMS_KEY: hyperparameters_json,
                MLFLOW_TRACKING_URI_KEY: mlflow_tracking_uri,
                MLFLOW_EXPERIMENT_KEY: mlflow_experiment,
                PARITY_TOLERANCE_KEY: parity_tolerance,
                PYTORCHJOB_KEY: pytorchjob_json,
                MLFLOW_POLICY_KEY: mlflow_unreachable,
                LOG_ROOT_KEY: log_root_for(pipeline_root),
                SERVING_BATCH_KEY: serving_batch_size,
            },
        )
        super().__init__(spec=spec)
