"""ChampionModel: imports the model currently in production as a ``Model`` artifact, the Evaluator's
baseline. Replaces TFX's latest-blessed Resolver, which the open-source KFP v2 backend cannot run."""

from __future__ import annotations

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ExecutionParameter

from torchtfx.components.champion import executor
from torchtfx.components.champion.constants import CHAMPION_KEY, STATISTICS_KEY
from torchtfx.components.shared.contracts import (
    MLFLOW_POLICY_KEY,
    MLFLOW_TRACKING_URI_KEY,
    REGISTERED_MODEL_KEY,
    SERVING_DIR_KEY,
)
from torchtfx.components.shared.mlflow_client import FAIL_IF_UNREACHABLE
from torchtfx.components.shared.run_identity import RUN_TOKEN_KEY, run_token_parameter


class ChampionModelSpec(types.ComponentSpec):
    INPUTS = {}
    OUTPUTS = {
        CHAMPION_KEY: ChannelParameter(type=standard_artifacts.Model),
        STATISTICS_KEY: ChannelParameter(type=standard_artifacts.ExampleStatistics),
    }
    PARAMETERS = {
        SERVING_DIR_KEY: ExecutionParameter(type=str),
        REGISTERED_MODEL_KEY: ExecutionParameter(type=str),
        MLFLOW_TRACKING_URI_KEY: ExecutionParameter(type=str),
        RUN_TOKEN_KEY: ExecutionParameter(type=str),
        MLFLOW_POLICY_KEY: ExecutionParameter(type=str),
    }


class ChampionModel(base_component.BaseComponent):
    SPEC_CLASS = ChampionModelSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(
        self,
        serving_dir: str,
        registered_model_name: str,
        mlflow_tracking_uri: str,
        mlflow_unreachable: str = FAIL_IF_UNREACHABLE,
    ) -> None:
        spec = ChampionModelSpec(
            champion=types.Channel(type=standard_artifacts.Model),
            champion_statistics=types.Channel(type=standard_artifacts.ExampleStatistics),
            serving_dir=serving_dir,
            registered_model_name=registered_model_name,
            mlflow_tracking_uri=mlflow_tracking_uri,
            mlflow_unreachable=mlflow_unreachable,
            # The orchestrator substitutes the run id: a new cache key per run, so the champion is
            # always looked up now, not replayed from an earlier run's cache.
            run_token=run_token_parameter(),
        )
        super().__init__(spec=spec)
