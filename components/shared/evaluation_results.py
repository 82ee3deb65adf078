"""TFMA's results as the Promoter and the reports read them: every metric value by slice, model and label, the
candidate's own values, and why a candidate was not blessed, in one screen.

Public for the Promoter (its rejection reasons and registry tags) and for the run reports (pipeline/reporting/).
What a label names, and which labels the reports show, is declared with the metrics
(:mod:`torchtfx.data.config.metrics`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from google.protobuf import text_format

from torchtfx.data.config.metrics import MACRO, MICRO

BASELINE_MODEL_NAME = "baseline"  # the champion, as TFX names the Evaluator's baseline model
CANDIDATE_MODEL_NAMES = ("", "candidate")  # the candidate: unnamed in a one-model evaluation
OVERALL_SLICE = "Overall"

# (slice, metric label, model name, is_diff) -> value
MetricValues = dict[tuple[str, str, str, bool], float]


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


def slice_name(slice_key: Any) -> str:
    """A TFMA slice key as the reports name it: ``Overall``, ``payment_type=Cash``."""
    import tensorflow_model_analysis as tfma

    key = tfma.slicer.deserialize_slice_key(slice_key)
    return OVERALL_SLICE if not key else ", ".join(f"{k}={v}" for k, v in key)


def metric_label(key: Any) -> str:
    """A TFMA MetricKey as the report names it: ``auc``, ``recall[class_id=2]``, ``auc(macro)``. Per-class
    and averaged metrics share a name; without the sub-key and aggregation they would overwrite each other."""
    label = key.name
    if key.HasField("sub_key"):
        sub = key.sub_key
        for field in ("class_id", "k", "top_k"):
            if sub.HasField(field):
                label += f"[{field}={getattr(sub, field).value}]"
    if key.HasField("aggregation_type"):
        aggregation = key.aggregation_type
        average = MACRO if aggregation.macro_average else MICRO if aggregation.micro_average else "weighted"
        label += f"({average})"
    return label


def metric_values(evaluation_uri: str) -> MetricValues:
    """(slice, metric label, model name, is_diff) -> value."""
    import tensorflow_model_analysis as tfma

    values: MetricValues = {}
    for metrics_for_slice in tfma.load_metrics(evaluation_uri):
        name = slice_name(metrics_for_slice.slice_key)
        for kv in metrics_for_slice.metric_keys_and_values:
            if kv.value.HasField("double_value"):
                values[(name, metric_label(kv.key), kv.key.model_name, kv.key.is_diff)] = kv.value.double_value.value
    return values


def candidate_metrics(evaluation_uri: str) -> dict[str, dict[str, float]]:
    """The candidate's own values per slice ("Overall", "payment_type=Cash", ...): not the champion's, not the
    differences."""
    result: dict[str, dict[str, float]] = {}
    for (slice_, label, model, is_diff), value in metric_values(evaluation_uri).items():
        if not is_diff and model in CANDIDATE_MODEL_NAMES:
            result.setdefault(slice_, {})[label] = value
    return result


def _threshold_text(threshold: Any) -> str:
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
            label = metric_label(key)
            failures.append(
                GateFailure(
                    metric=label,
                    slice=name,
                    candidate=values.get((name, label, key.model_name, False)),
                    champion=values.get((name, label, BASELINE_MODEL_NAME, False)),
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
