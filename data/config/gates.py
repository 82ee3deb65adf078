"""The promotion gates' settings: value thresholds on the candidate and change thresholds against the champion.
Parsed once, as the ``gates:`` section of the dataset config; which metric each field bounds, and which metrics
value_floors / value_ceilings may name, is declared with the metrics (:mod:`torchtfx.data.config.metrics`); built
into the TFMA EvalConfig by :mod:`torchtfx.pipeline.evaluation.config`."""

from __future__ import annotations

import pydantic

from torchtfx.data.config import metrics
from torchtfx.data.config.strict import ConfigError, StrictConfig
from torchtfx.data.config.task import REGRESSION, TASKS


class GateConfigError(ConfigError):
    """The gates section of a config is malformed."""


def _bounded_by_task() -> dict[str, dict[str, str]]:
    """Per task, the metrics value_floors / value_ceilings may name: metric key -> TFMA class, by key."""
    return {
        task: {m.key: m.tfma_class for m in sorted(metrics.EVALUATED[task].bounded, key=lambda m: m.key)}
        for task in TASKS
    }


def _own_gates() -> dict[str, str]:
    """Metric key -> the value gate fields of its own (a floor in value_floors would be a second, conflicting one)."""
    fields: dict[str, list[metrics.Gate]] = {}
    for gate in metrics.GATES:
        if gate.kind in metrics.VALUE_KINDS:
            fields.setdefault(gate.metric.key, []).append(gate)
    own = {
        key: gates[0].field if len(gates) == 1 else " or ".join(f"{g.field} ({g.task})" for g in gates)
        for key, gates in fields.items()
    }
    # The trainer's name for multiclass accuracy, which a binary task calls binary_accuracy.
    own["accuracy"] = "accuracy_floor (multiclass; binary_accuracy in value_floors for a binary task)"
    return own


_BOUNDED_BY_TASK = _bounded_by_task()
_OWN_GATES = _own_gates()
_ALL_BOUNDED = {key: tfma_class for bounded in _BOUNDED_BY_TASK.values() for key, tfma_class in bounded.items()}
_REPORT_NAME = {tfma_class: name for name, tfma_class in _ALL_BOUNDED.items()}
_CEILING_ONLY = {m.tfma_class for m in metrics.METRICS if m.lower_is_better}


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
    # are metrics.EVALUATED's "bounded" (multiclass: precision and recall, for every class; regression: ceilings only)
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
        own = ", ".join(metrics.TASK_GATES[task])
        problems = [
            f"gates.{name} applies to {other} tasks only; for a {task} task use {own}"
            for other, names in metrics.TASK_GATES.items()
            if other != task
            for name in names
            if getattr(self, name) != self.default_of(name)
        ]
        bounded = _BOUNDED_BY_TASK[task]
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
