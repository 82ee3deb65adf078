"""Promoter: the blessed candidate becomes champion (atomic push, serving config, MLflow aliases);
a rejected one is recorded as challenger and production stays byte-identical. Replaces Pusher."""

from __future__ import annotations

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ExecutionParameter

from torchtfx.components.promoter import executor
from torchtfx.components.promoter.confirmation import STAGED
from torchtfx.components.promoter.constants import (
    BATCHING_KEY,
    BLESSING_KEY,
    CHAMPION_KEY,
    CODE_VERSION_KEY,
    CONFIRM_LABELS_KEY,
    EVALUATION_KEY,
    EXAMPLES_KEY,
    LOAD_TIMEOUT_KEY,
    MODEL_KEY,
    PUSHED_MODEL_KEY,
    SERVING_ADDRESS_KEY,
    SERVING_MODEL_NAME_KEY,
    STATISTICS_KEY,
)
from torchtfx.components.shared.contracts import MLFLOW_TRACKING_URI_KEY, REGISTERED_MODEL_KEY, SERVING_DIR_KEY
from torchtfx.components.shared.run_identity import RUN_TOKEN_KEY, run_token_parameter
from torchtfx.components.tf_serving.batching import BatchingParams
from torchtfx.components.tf_serving.transition import DEFAULT_LOAD_TIMEOUT_S


class PromoterSpec(types.ComponentSpec):
    INPUTS = {
        MODEL_KEY: ChannelParameter(type=standard_artifacts.Model),
        BLESSING_KEY: ChannelParameter(type=standard_artifacts.ModelBlessing),
        EVALUATION_KEY: ChannelParameter(type=standard_artifacts.ModelEvaluation),
        EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples),
        STATISTICS_KEY: ChannelParameter(type=standard_artifacts.ExampleStatistics, optional=True),
        CHAMPION_KEY: ChannelParameter(type=standard_artifacts.Model, optional=True),
    }
    OUTPUTS = {PUSHED_MODEL_KEY: ChannelParameter(type=standard_artifacts.PushedModel)}
    PARAMETERS = {
        SERVING_DIR_KEY: ExecutionParameter(type=str),
        SERVING_MODEL_NAME_KEY: ExecutionParameter(type=str),
        REGISTERED_MODEL_KEY: ExecutionParameter(type=str),
        MLFLOW_TRACKING_URI_KEY: ExecutionParameter(type=str),
        CODE_VERSION_KEY: ExecutionParameter(type=str),
        BATCHING_KEY: ExecutionParameter(type=str),
        SERVING_ADDRESS_KEY: ExecutionParameter(type=str),
        LOAD_TIMEOUT_KEY: ExecutionParameter(type=float),
        CONFIRM_LABELS_KEY: ExecutionParameter(type=str, optional=True),
        # The run id, for the registry tags; the Promoter runs on every run anyway (after a fresh Evaluator).
        RUN_TOKEN_KEY: ExecutionParameter(type=str),
    }


class Promoter(base_component.BaseComponent):
    SPEC_CLASS = PromoterSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(
        self,
        model: types.BaseChannel,
        model_blessing: types.BaseChannel,
        evaluation: types.BaseChannel,
        examples: types.BaseChannel,
        statistics: types.BaseChannel | None,
        champion: types.BaseChannel | None,
        serving_dir: str,
        serving_model_name: str,
        registered_model_name: str,
        mlflow_tracking_uri: str,
        code_version: str,
        batching: BatchingParams,
        serving_address: str = "",
        serving_load_timeout_s: float = DEFAULT_LOAD_TIMEOUT_S,
        confirm_labels: str = STAGED,
    ) -> None:
        spec = PromoterSpec(
            model=model,
            model_blessing=model_blessing,
            evaluation=evaluation,
            examples=examples,
            statistics=statistics,
            champion=champion,
            pushed_model=types.Channel(type=standard_artifacts.PushedModel),
            serving_dir=serving_dir,
            serving_model_name=serving_model_name,
            registered_model_name=registered_model_name,
            mlflow_tracking_uri=mlflow_tracking_uri,
            code_version=code_version,
            batching_parameters=batching.to_json(),
            serving_address=serving_address,
            serving_load_timeout_s=serving_load_timeout_s,
            # Left out when the default: a staged pipeline's spec (and the compiled Kubeflow one) is as before.
            confirm_labels=None if confirm_labels == STAGED else confirm_labels,
            run_token=run_token_parameter(),
        )
        super().__init__(spec=spec)
