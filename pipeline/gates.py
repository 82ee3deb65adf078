"""The promotion gates, in one place: value thresholds on the candidate and change thresholds
against the champion. Built into the TFMA EvalConfig by :mod:`torchtfx.pipeline.eval_config`."""

from __future__ import annotations

import dataclasses
from typing import Any

# TFMA metric class names that may carry extra value floors/ceilings.
KNOWN_METRICS = ("AUC", "AUCPrecisionRecall", "BinaryAccuracy", "Precision", "Recall", "Calibration")


class GateConfigError(ValueError):
    """The gates section of a config is malformed."""


@dataclasses.dataclass(frozen=True)
class GateConfig:
    auc_floor: float = 0.75  # value: overall AUC must reach this
    max_auc_drop: float = 0.01  # change: overall AUC may fall at most this far below the champion's
    calibration_band: tuple[float, float] = (0.75, 1.25)  # value: mean prediction / mean label
    value_floors: dict[str, float] = dataclasses.field(default_factory=dict)  # {"BinaryAccuracy": 0.8}
    value_ceilings: dict[str, float] = dataclasses.field(default_factory=dict)
    # change, per slice: {"payment_type": 0.05} (every value) or {"payment_type=Cash": 0.05}
    slice_max_auc_drop: dict[str, float] = dataclasses.field(default_factory=dict)

    def validate(self) -> GateConfig:
        low, high = self.calibration_band
        problems = []
        if not 0.0 <= self.auc_floor <= 1.0:
            problems.append(f"auc_floor={self.auc_floor} is not in [0, 1]")
        if self.max_auc_drop < 0:
            problems.append(f"max_auc_drop={self.max_auc_drop} must be >= 0")
        if not 0 < low < high:
            problems.append(f"calibration_band={self.calibration_band} must satisfy 0 < low < high")
        unknown = sorted(set(self.value_floors) | set(self.value_ceilings) - set(KNOWN_METRICS))
        if unknown:
            problems.append(f"unknown metrics {unknown}; known: {', '.join(KNOWN_METRICS)}")
        if problems:
            raise GateConfigError("invalid gates: " + "; ".join(problems))
        return self

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None, **overrides: Any) -> GateConfig:
        raw = dict(raw or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise GateConfigError(f"unknown gate settings: {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        if "calibration_band" in raw:
            raw["calibration_band"] = tuple(float(v) for v in raw["calibration_band"])
        raw.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**raw).validate()
