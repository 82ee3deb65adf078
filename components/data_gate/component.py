"""DataGate: stops the run before Transform and training when ExampleValidator found anomalies.

ExampleValidator only records anomalies; nothing downstream in stock TFX refuses to run on them.
The pipeline makes Transform depend on this gate, so bad data never reaches training or serving.
"""

from __future__ import annotations

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ExecutionParameter

from torchtfx.components.data_gate import executor
from torchtfx.components.data_gate.constants import (
    ANOMALIES_KEY,
    BASELINE_STATISTICS_KEY,
    LABEL_CLASSES_KEY,
    NEWEST_SPAN_SPLIT_KEY,
    SCHEMA_HINT_KEY,
    SCHEMA_KEY,
    STATISTICS_KEY,
)


class DataGateSpec(types.ComponentSpec):
    INPUTS = {
        ANOMALIES_KEY: ChannelParameter(type=standard_artifacts.ExampleAnomalies),
        STATISTICS_KEY: ChannelParameter(type=standard_artifacts.ExampleStatistics, optional=True),
        SCHEMA_KEY: ChannelParameter(type=standard_artifacts.Schema, optional=True),
        BASELINE_STATISTICS_KEY: ChannelParameter(type=standard_artifacts.ExampleStatistics, optional=True),
    }
    OUTPUTS = {}
    PARAMETERS = {
        SCHEMA_HINT_KEY: ExecutionParameter(type=str),
        LABEL_CLASSES_KEY: ExecutionParameter(type=str, optional=True),
        NEWEST_SPAN_SPLIT_KEY: ExecutionParameter(type=str, optional=True),
    }


class DataGate(base_component.BaseComponent):
    SPEC_CLASS = DataGateSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(
        self,
        anomalies: types.BaseChannel,
        schema_hint: str,
        statistics: types.BaseChannel | None = None,
        schema: types.BaseChannel | None = None,
        baseline_statistics: types.BaseChannel | None = None,
        label_classes: str | None = None,
        newest_span_split: str | None = None,
    ) -> None:
        """``schema_hint`` names the curated schema file the error message points the user to. With
        ``statistics``, ``schema`` and ``baseline_statistics`` (the champion's training data), drift beyond
        the schema's ``drift_comparator`` thresholds stops the run too. With ``label_classes`` (a multiclass
        label: ``label_classes.LabelClasses`` JSON) and ``statistics``, a ``num_classes`` above the label's
        distinct values in the train split stops it as well. With ``newest_span_split`` (a dataset of spans: the
        split that holds the newest span alone), that split is the new data compared with the champion's, and its
        drift from the window (the train split) stops the run too."""
        spec = DataGateSpec(
            anomalies=anomalies,
            schema_hint=schema_hint,
            statistics=statistics,
            schema=schema,
            baseline_statistics=baseline_statistics,
            label_classes=label_classes,
            newest_span_split=newest_span_split,
        )
        super().__init__(spec=spec)
