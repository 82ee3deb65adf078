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
    NEWEST_SPAN_SPLIT_KEY,
    SCHEMA_HINT_KEY,
    SCHEMA_KEY,
    STATISTICS_KEY,
)

logger = logging.getLogger(__name__)


def _drift(input_dict: dict[str, list[types.Artifact]], newest_span_split: str | None) -> tuple[list[str], list[str]]:
    """The drift lines, and the baselines they were measured against. The new data is the train split, or for a
    dataset of spans the newest span's split, which is also compared with the window (the train split)."""
    current, schema, baseline = (input_dict.get(k) or [] for k in (STATISTICS_KEY, SCHEMA_KEY, BASELINE_STATISTICS_KEY))
    if not (current and schema):
        return [], []
    schema_proto = io_utils.SchemaReader().read(io_utils.get_only_uri_in_dir(schema[0].uri))
    new_data = newest_span_split or drift.DRIFT_SPLIT
    lines: list[str] = []
    baselines: list[str] = []
    if newest_span_split:
        lines += drift.drift_lines(
            current[0].uri, current[0].uri, schema_proto, newest_span_split, drift.DRIFT_SPLIT, drift.WINDOW_DATA
        )
        baselines.append(drift.WINDOW_DATA)
    if baseline:
        lines += drift.drift_lines(current[0].uri, baseline[0].uri, schema_proto, new_data, drift.DRIFT_SPLIT)
        baselines.append(drift.CHAMPION_DATA)
    else:
        logger.info("No drift check against the champion: no champion training statistics (first run?)")
    return lines, baselines


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
        lines, baselines = _drift(input_dict, exec_properties.get(NEWEST_SPAN_SPLIT_KEY))
        anomalies.check(splits, exec_properties[SCHEMA_HINT_KEY], lines, tuple(baselines))
        _check_label_classes(input_dict, exec_properties)
