"""The promotion gates, in one place: value thresholds on the candidate and change thresholds against the
champion. Parsed once, as the ``gates:`` section of the dataset config; built into the TFMA EvalConfig by
:mod:`torchtfx.pipeline.eval_config`."""

from __future__ import annotations

from typing import Any

import pydantic

from torchtfx.data.config.strict import ConfigError, StrictConfig

# Metrics that may carry extra value floors/ceilings: the names the run report prints -> TFMA metric classes.
# A TFMA class name (``Precision``) is accepted too.
BOUNDED_METRICS = {
    "auc_precision_recall": "AUCPrecisionRecall",
    "binary_accuracy": "BinaryAccuracy",
    "precision": "Precision",
    "recall": "Recall",
}
# These have gates of their own; a floor in value_floors would be a second, conflicting one.
_OWN_GATES = {"auc": "auc_floor", "calibration": "calibration_band"}


class GateConfigError(ConfigError):
    """The gates section of a config is malformed."""


def _metric_class(name: str) -> str:
    key = str(name).strip()
    by_class = {v: v for v in BOUNDED_METRICS.values()}
    lowered = key.lower()
    if lowered in _OWN_GATES:
        raise ValueError(f"'{key}' has its own gate: set {_OWN_GATES[lowered]} instead")
    found = BOUNDED_METRICS.get(lowered) or by_class.get(key)
    if found is None:
        raise ValueError(f"unknown metric {key!r}; metrics that take a floor or ceiling: {', '.join(BOUNDED_METRICS)}")
    return found


class GateConfig(StrictConfig):
    config_error = GateConfigError

    auc_floor: float = pydantic.Field(0.75, ge=0.0, le=1.0)  # value: overall AUC must reach this
    max_auc_drop: float = pydantic.Field(0.01, ge=0.0)  # change: overall AUC may fall this far below the champion's
    calibration_band: tuple[float, float] = (0.75, 1.25)  # value: mean prediction / mean label
    # value, overall: {"binary_accuracy": 0.8}, keyed by TFMA metric class once parsed
    value_floors: dict[str, float] = {}
    value_ceilings: dict[str, float] = {}
    # change, per slice: {"payment_type": 0.05} (every value) or {"payment_type=Cash": 0.05}
    slice_max_auc_drop: dict[str, pydantic.NonNegativeFloat] = {}

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
            raise ValueError(f"value_floors above value_ceilings for {', '.join(sorted(crossed))}: no model can pass")
        return self

    def problems_for(self, task: str) -> list[str]:
        """Gates set that do not apply to ``task`` (filled in per task by the TFMA work)."""
        return []

    def with_overrides(self, **overrides: Any) -> GateConfig:
        """The gates with the command line's overrides (``None``: not given, keep the config's value)."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return self.replace(**given) if given else self
