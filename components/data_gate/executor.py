"""Thin TFX glue: fail the pipeline run when ExampleValidator found anomalies."""

from __future__ import annotations

from typing import Any

from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils

from components.data_gate import anomalies
from components.data_gate.constants import ANOMALIES_KEY, SCHEMA_HINT_KEY


class Executor(base_executor.BaseExecutor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        artifact = artifact_utils.get_single_instance(input_dict[ANOMALIES_KEY])
        splits = {
            split: anomalies.read_anomalies(artifact_utils.get_split_uri([artifact], split))
            for split in artifact_utils.decode_split_names(artifact.split_names)
        }
        anomalies.check(splits, exec_properties[SCHEMA_HINT_KEY])
