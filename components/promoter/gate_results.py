"""Why a candidate was not blessed, from TFMA's validation result, in one screen."""

from __future__ import annotations

import dataclasses

from google.protobuf import text_format

BASELINE_MODEL_NAME = "baseline"


@dataclasses.dataclass(frozen=True)
class GateFailure:
    metric: str
    slice: str
    candidate: float | None
    champion: float | None
    threshold: str
    is_change: bool

    def line(self) -> str:
        champion = "n/a" if self.champion is None else f"{self.champion:.4f}"
        candidate = "n/a" if self.candidate is None else f"{self.candidate:.4f}"
        kind = "change" if self.is_change else "value"
        return (
            f"{self.metric:<12} {self.slice:<22} candidate {candidate:>7}  champion {champion:>7}  "
            f"{kind} gate: {self.threshold}"
        )


def slice_name(slice_key) -> str:
    import tensorflow_model_analysis as tfma

    key = tfma.slicer.deserialize_slice_key(slice_key)
    return "Overall" if not key else ", ".join(f"{k}={v}" for k, v in key)


def metric_values(evaluation_uri: str) -> dict[tuple[str, str, str, bool], float]:
    """(slice, metric, model name, is_diff) -> value."""
    import tensorflow_model_analysis as tfma

    values = {}
    for metrics_for_slice in tfma.load_metrics(evaluation_uri):
        name = slice_name(metrics_for_slice.slice_key)
        for kv in metrics_for_slice.metric_keys_and_values:
            if kv.value.HasField("double_value"):
                values[(name, kv.key.name, kv.key.model_name, kv.key.is_diff)] = kv.value.double_value.value
    return values


def _threshold_text(threshold) -> str:
    """e.g. ">= 0.75", "in [0.75, 1.25]", "candidate - champion >= -0.01"."""
    if threshold.HasField("value_threshold"):
        bounds = threshold.value_threshold
        low = bounds.lower_bound.value if bounds.HasField("lower_bound") else None
        high = bounds.upper_bound.value if bounds.HasField("upper_bound") else None
        if low is not None and high is not None:
            return f"in [{low:g}, {high:g}]"
        return f">= {low:g}" if low is not None else f"<= {high:g}"
    if threshold.HasField("change_threshold"):
        change = threshold.change_threshold
        import tensorflow_model_analysis as tfma

        higher = change.direction == tfma.MetricDirection.HIGHER_IS_BETTER
        parts = []
        if change.HasField("absolute"):
            parts.append(f"candidate - champion {'>=' if higher else '<='} {change.absolute.value:g}")
        if change.HasField("relative"):
            parts.append(f"candidate / champion - 1 {'>=' if higher else '<='} {change.relative.value:g}")
        return " and ".join(parts)
    return " ".join(text_format.MessageToString(threshold, as_one_line=True).split())


def gate_failures(evaluation_uri: str) -> list[GateFailure]:
    """Every failed threshold, with the candidate's and the champion's value of that metric."""
    import tensorflow_model_analysis as tfma

    result = tfma.load_validation_result(evaluation_uri)
    values = metric_values(evaluation_uri)
    failures = []
    for per_slice in result.metric_validations_per_slice:
        name = slice_name(per_slice.slice_key)
        for failure in per_slice.failures:
            key = failure.metric_key
            failures.append(
                GateFailure(
                    metric=key.name,
                    slice=name,
                    candidate=values.get((name, key.name, key.model_name, False)),
                    champion=values.get((name, key.name, BASELINE_MODEL_NAME, False)),
                    threshold=_threshold_text(failure.metric_threshold),
                    is_change=key.is_diff,
                )
            )
    return failures


def summary(failures: list[GateFailure]) -> str:
    if not failures:
        return "All gates passed."
    lines = [f"Candidate REJECTED: {len(failures)} gate(s) failed; the champion and serving directory are unchanged."]
    lines += ["  " + f.line() for f in failures]
    return "\n".join(lines)
