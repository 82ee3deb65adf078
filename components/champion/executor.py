"""Thin TFX glue: publish the current champion as a Model artifact, or no artifact on a first run."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.proto.orchestration import execution_result_pb2
from tfx.types import artifact_utils
from tfx.utils import io_utils, path_utils

from torchtfx.components.champion.constants import (
    CHAMPION_KEY,
    REGISTRY_VERSION_PROPERTY,
    SERVING_VERSION_PROPERTY,
    SOURCE_PROPERTY,
    STATISTICS_KEY,
)
from torchtfx.components.champion.resolve import Champion, resolve_champion
from torchtfx.components.shared.absent import ABSENT_PROPERTY
from torchtfx.components.shared.contracts import (
    MLFLOW_POLICY_KEY,
    MLFLOW_TRACKING_URI_KEY,
    REGISTERED_MODEL_KEY,
    SERVING_DIR_KEY,
    TRAIN_STATISTICS_TAG,
)
from torchtfx.components.shared.mlflow_client import (
    FAIL_IF_UNREACHABLE,
    Registry,
    resolve_tracking_uri,
    tracking_uri_or_none,
)

logger = logging.getLogger(__name__)


def _publish(output: execution_result_pb2.ExecutorOutput, key: str, artifact: types.Artifact, present: bool) -> None:
    """Publish ``artifact``, or nothing: local TFX then drops the channel; Kubeflow always publishes one,
    so an absent artifact is marked for torchtfx.pipeline.kfp.entrypoint to drop downstream."""
    if present:
        output.output_artifacts[key].artifacts.append(artifact.mlmd_artifact)
    else:
        artifact.set_int_custom_property(ABSENT_PROPERTY, 1)
        output.output_artifacts[key].SetInParent()


def _copy_statistics(champion: Champion | None, registry: Registry | None, statistics: types.Artifact) -> bool:
    """Copy the champion's training-data statistics (the drift baseline) into ``statistics``, if recorded."""
    if champion is None or champion.registry_version is None or registry is None:
        return False
    source = registry.get_version(champion.registry_version).tags.get(TRAIN_STATISTICS_TAG)
    if not source or not fileio.isdir(source):
        logger.warning("The champion has no training statistics on record (%s): no drift check this run", source)
        return False
    io_utils.copy_dir(source, statistics.uri)
    names = [os.fsdecode(name) for name in fileio.listdir(source)]  # TFX types them str | bytes
    splits = sorted(name[len("Split-") :] for name in names if name.startswith("Split-"))
    statistics.split_names = artifact_utils.encode_split_names([s.rstrip("/") for s in splits])
    return True


class Executor(base_executor.BaseExecutor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> execution_result_pb2.ExecutorOutput:
        artifact = artifact_utils.get_single_instance(output_dict[CHAMPION_KEY])
        statistics = artifact_utils.get_single_instance(output_dict[STATISTICS_KEY])
        tracking_uri = tracking_uri_or_none(
            resolve_tracking_uri(exec_properties[MLFLOW_TRACKING_URI_KEY]),
            exec_properties.get(MLFLOW_POLICY_KEY) or FAIL_IF_UNREACHABLE,
            "The run",
        )
        # Without the registry (policy 'continue'), the serving directory's stable version is the champion.
        registry = Registry(tracking_uri, exec_properties[REGISTERED_MODEL_KEY]) if tracking_uri else None
        champion = resolve_champion(Path(exec_properties[SERVING_DIR_KEY]), registry)
        output = execution_result_pb2.ExecutorOutput()
        _publish(output, STATISTICS_KEY, statistics, _copy_statistics(champion, registry, statistics))
        if champion is None:
            logger.info("No champion yet: the candidate is judged by value thresholds alone")
            _publish(output, CHAMPION_KEY, artifact, False)
            return output
        # A copy, so the baseline the Evaluator saw stays on record even after later promotions.
        shutil.copytree(champion.saved_model_dir, path_utils.serving_model_dir(artifact.uri))
        artifact.set_int_custom_property(SERVING_VERSION_PROPERTY, champion.serving_version)
        artifact.set_string_custom_property(SOURCE_PROPERTY, champion.source)
        if champion.registry_version is not None:
            artifact.set_string_custom_property(REGISTRY_VERSION_PROPERTY, str(champion.registry_version))
        logger.info("Champion: serving version %s (from the %s)", champion.serving_version, champion.source)
        _publish(output, CHAMPION_KEY, artifact, True)
        return output
