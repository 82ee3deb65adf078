"""The promotion gates, in one place: value thresholds on the candidate and change thresholds against the
champion. Parsed once, as the ``gates:`` section of the dataset config; built into the TFMA EvalConfig by
:mod:`torchtfx.pipeline.eval_config`."""

from __future__ import annotations

from typing import Any

import pydantic

from torchtfx.data.config.strict import ConfigError, StrictConfig
from torchtfx.data.config.task import BINARY, MULTICLASS, REGRESSION

# Metrics that may carry extra value floors/ceilings, per task: the names the run report prints -> TFMA
# metric classes. A TFMA class name (``Precision``) is accepted too.
BOUNDED_METRICS = {
    "auc_precision_recall": "AUCPrecisionRecall",
    "binary_accuracy": "BinaryAccuracy",
    "precision": "Precision",
    "recall": "Recall",
}
# Multiclass: a floor (or ceiling) on precision or recall holds for every class (recall[class_id=k]).
MULTICLASS_BOUNDED_METRICS = {"precision": "Precision", "recall": "Recall"}
# Regression: error metrics, lower is better: they take ceilings only.
REGRESSION_BOUNDED_METRICS = {
    "mean_absolute_error": "MeanAbsoluteError",
    "root_mean_squared_error": "RootMeanSquaredError",
}
BOUNDED_BY_TASK = {
    BINARY: BOUNDED_METRICS,
    MULTICLASS: MULTICLASS_BOUNDED_METRICS,
    REGRESSION: REGRESSION_BOUNDED_METRICS,
}
# These have gates of their own; a floor in value_floors would be a second, conflicting one.
_OWN_GATES = {
    "auc": "auc_floor (binary) or macro_auc_floor (multiclass)",
    "calibration": "calibration_band",
    "sparse_categorical_accuracy": "accuracy_floor",
    "accuracy": "accuracy_floor (multiclass; binary_accuracy in value_floors for a binary task)",
    "mean_squared_error": "mse_ceiling",
    "squared_pearson_correlation": "squared_correlation_floor",
}
# Which gate fields belong to which task (the fields not listed apply to every task).
TASK_GATES = {
    BINARY: ("auc_floor", "max_auc_drop", "calibration_band", "slice_max_auc_drop"),
    MULTICLASS: ("accuracy_floor", "macro_auc_floor", "max_accuracy_drop"),
    REGRESSION: ("mse_ceiling", "squared_correlation_floor", "max_mse_increase"),
}


class GateConfigError(ConfigError):
    """The gates section of a config is malformed."""


_ALL_BOUNDED = {**BOUNDED_METRICS, **MULTICLASS_BOUNDED_METRICS, **REGRESSION_BOUNDED_METRICS}
_REPORT_NAME = {tfma_class: name for name, tfma_class in _ALL_BOUNDED.items()}
_CEILING_ONLY = set(REGRESSION_BOUNDED_METRICS.values())


def _metric_class(name: str) -> str:
    key = str(name).strip()
    by_class = {v: v for v in _ALL_BOUNDED.values()}
    lowered = key.lower()
    if lowered in _OWN_GATES:
        raise ValueError(f"'{key}' has its own gate: set {_OWN_GATES[lowered]} instead")
    found = _ALL_BOUNDED.get(lowered) or by_class.get(key)
    if found is None:
        raise ValueError(f"unknown metric {key!r}; metrics that take a floor or ceiling: {', '.join(_ALL_BOUNDED)}")
    return found


class GateConfig(StrictConfig):
    config_error = GateConfigError

    auc_floor: float = pydantic.Field(0.75, ge=0.0, le=1.0)  # value: overall AUC must reach this
    max_auc_drop: float = pydantic.Field(0.01, ge=0.0)  # change: overall AUC may fall this far below the champion's
    calibration_band: tuple[float, float] = (0.75, 1.25)  # value: mean prediction / mean label
    # value, overall: {"binary_accuracy": 0.8}, keyed by TFMA metric class once parsed; the names a task takes
    # are BOUNDED_BY_TASK's (multiclass: precision and recall, for every class; regression: ceilings only)
    value_floors: dict[str, float] = {}
    value_ceilings: dict[str, float] = {}
    # change, per slice: {"payment_type": 0.05} (every value) or {"payment_type=Cash": 0.05}
    slice_max_auc_drop: dict[str, pydantic.NonNegativeFloat] = {}
    # multiclass. value: macro-averaged one-vs-rest AUC (0.5 is chance), optional accuracy floor;
    # change: accuracy may fall this far below the champion's
    macro_auc_floor: float = pydantic.Field(0.7, ge=0.0, le=1.0)
    accuracy_floor: float | None = pydantic.Field(None, ge=0.0, le=1.0)
    max_accuracy_drop: float = pydantic.Field(0.01, ge=0.0)
    # regression. value: squared Pearson correlation of predictions and targets (scale-free; 0 = no signal),
    # optional MSE ceiling (in the target's units squared); change: MSE may exceed the champion's by this
    # fraction (0.05: at most 5% worse), relative because an absolute MSE depends on the target's scale
    squared_correlation_floor: float = pydantic.Field(0.1, ge=0.0, le=1.0)
    mse_ceiling: pydantic.PositiveFloat | None = None
    max_mse_increase: float = pydantic.Field(0.05, ge=0.0)

    @pydantic.field_validator("calibration_band")
    @classmethod
    def _ordered_band(cls, band: tuple[float, float]) -> tuple[float, float]:
        if not 0 < band[0] < band[1]:
            raise ValueError(f"{list(band)} must satisfy 0 < low < high")
        return band

    @pydantic.field_validator("value_floors", "value_ceilings")
    @classmethod
    def _known_metrics(cls, bounds: dict[str, float]) -> dict[str, float]:
        return {_metric_class(name): value for name, value in bounds.items()}

    @pydantic.model_validator(mode="after")
    def _floor_below_ceiling(self) -> GateConfig:
        crossed = [
            m for m in self.value_floors if m in self.value_ceilings and self.value_floors[m] > self.value_ceilings[m]
        ]
        if crossed:
            names = ", ".join(sorted(_REPORT_NAME[m] for m in crossed))
            raise ValueError(f"value_floors above value_ceilings for {names}: no model can pass")
        return self

    def problems_for(self, task: str) -> list[str]:
        """Gates set for another task than ``task`` (compared with their defaults, so that a JSON round trip
        passes), floors or ceilings on metrics the task does not compute, and floors on error metrics. Each
        message names the field and what to set instead."""
        own = ", ".join(TASK_GATES[task])
        problems = [
            f"gates.{name} applies to {other} tasks only; for a {task} task use {own}"
            for other, names in TASK_GATES.items()
            if other != task
            for name in names
            if getattr(self, name) != self.default_of(name)
        ]
        bounded = BOUNDED_BY_TASK[task]
        takes = ", ".join(bounded)
        for field in ("value_floors", "value_ceilings"):
            stray = sorted(_REPORT_NAME[m] for m in getattr(self, field) if m not in bounded.values())
            if stray:
                problems.append(f"gates.{field} names {', '.join(stray)}, not a {task} metric; {task} takes: {takes}")
        floored_errors = sorted(_REPORT_NAME[m] for m in self.value_floors if m in _CEILING_ONLY)
        if floored_errors and task == REGRESSION:
            problems.append(
                f"gates.value_floors names {', '.join(floored_errors)}: an error metric is better when lower, "
                "so it takes a ceiling (value_ceilings), not a floor"
            )
        return problems

    def with_overrides(self, **overrides: Any) -> GateConfig:
        """The gates with the command line's overrides (``None``: not given, keep the config's value)."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return self.replace(**given) if given else self
