"""Why a candidate was not blessed, from TFMA's validation result, in one screen."""

from __future__ import annotations

import dataclasses

from google.protobuf import text_format

BASELINE_MODEL_NAME = "baseline"
# What the run report, the HTML report and the registry tags show, in this order; each task's Evaluator
# computes its own subset (binary: auc ... calibration; multiclass: accuracy and the averaged AUCs;
# regression: the error metrics), so filtering by presence picks the task's.
REPORTED_METRICS = (
    "auc", "auc_precision_recall", "binary_accuracy", "precision", "recall", "calibration",
    "sparse_categorical_accuracy", "auc(macro)", "auc(micro)",
    "mean_squared_error", "root_mean_squared_error", "mean_absolute_error", "squared_pearson_correlation",
    "weighted_example_count", "example_count",
)  # fmt: skip
HEADLINE_METRICS = ("auc", "sparse_categorical_accuracy", "mean_squared_error")
# Error metrics: a fall is an improvement (the reports colour a change by it).
LOWER_IS_BETTER = frozenset({"mean_squared_error", "root_mean_squared_error", "mean_absolute_error"})


def reported(labels) -> list[str]:
    """The labels to show, in REPORTED_METRICS order, then per-class recall (``recall[class_id=k]``)."""
    present = set(labels)
    per_class = sorted((m for m in present if m.startswith("recall[class_id=")), key=lambda m: int(m[16:-1]))
    return [m for m in REPORTED_METRICS if m in present] + per_class


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


def metric_label(key) -> str:
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
        label += "(macro)" if aggregation.macro_average else "(micro)" if aggregation.micro_average else "(weighted)"
    return label


def metric_values(evaluation_uri: str) -> dict[tuple[str, str, str, bool], float]:
    """(slice, metric label, model name, is_diff) -> value."""
    import tensorflow_model_analysis as tfma

    values = {}
    for metrics_for_slice in tfma.load_metrics(evaluation_uri):
        name = slice_name(metrics_for_slice.slice_key)
        for kv in metrics_for_slice.metric_keys_and_values:
            if kv.value.HasField("double_value"):
                values[(name, metric_label(kv.key), kv.key.model_name, kv.key.is_diff)] = kv.value.double_value.value
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
