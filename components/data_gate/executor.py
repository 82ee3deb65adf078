"""Thin TFX glue: fail the pipeline run when ExampleValidator found anomalies."""

from __future__ import annotations

import logging
from typing import Any

from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import io_utils

from torchtfx.components.data_gate import anomalies, drift, label_classes
from torchtfx.components.data_gate.constants import (
    ANOMALIES_KEY,
    BASELINE_STATISTICS_KEY,
    LABEL_CLASSES_KEY,
    SCHEMA_HINT_KEY,
    SCHEMA_KEY,
    STATISTICS_KEY,
)

logger = logging.getLogger(__name__)


def _drift(input_dict: dict[str, list[types.Artifact]]) -> list[str]:
    current, schema, baseline = (input_dict.get(k) or [] for k in (STATISTICS_KEY, SCHEMA_KEY, BASELINE_STATISTICS_KEY))
    if not (current and schema and baseline):
        logger.info("No drift check: no champion training statistics to compare with (first run?)")
        return []
    schema_proto = io_utils.SchemaReader().read(io_utils.get_only_uri_in_dir(schema[0].uri))
    return drift.drift_lines(current[0].uri, baseline[0].uri, schema_proto)


def _check_label_classes(input_dict: dict[str, list[types.Artifact]], exec_properties: dict[str, Any]) -> None:
    """A multiclass label's num_classes against the train split's statistics (before Transform learns them)."""
    label = exec_properties.get(LABEL_CLASSES_KEY)
    statistics = input_dict.get(STATISTICS_KEY) or []
    if label and statistics:
        found = drift.load_split_statistics(statistics[0].uri, label_classes.LABEL_SPLIT)
        label_classes.check(found, label_classes.LabelClasses.from_json(label))


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
        anomalies.check(splits, exec_properties[SCHEMA_HINT_KEY], _drift(input_dict))
        _check_label_classes(input_dict, exec_properties)
