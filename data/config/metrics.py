"""The evaluation metrics, each declared once: its TFMA class and the key of its value in TFMA's results, the
tasks that compute it, whether lower is better, which gates bound it, and how the reports show it.

Everything else derives from here: the gate config's validation (``gates.py``), the TFMA EvalConfig
(``pipeline/evaluation/config.py``), the reading of TFMA's results (``components/shared/evaluation_results.py``) that
the Promoter and the reports share, and the reports themselves.

A *label* names one value in the reports: the metric key, with the class for a per-class value
(``recall[class_id=2]``) or the average for a class-averaged one (``auc(macro)``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from torchtfx.data.config.task import BINARY, MULTICLASS, REGRESSION, TASKS

MACRO, MICRO = "macro", "micro"  # the class averages of a multiclass metric
CURVE_THRESHOLDS = '"num_thresholds": 1000'  # TFMA's default is 10,000 (pipeline/evaluation/config.py says why not)


@dataclasses.dataclass(frozen=True)
class Metric:
    """One TFMA metric as this project computes, gates and reports it."""

    tfma_class: str  # the class TFMA's MetricConfig names: "AUC"
    key: str  # the name of its value in TFMA's results, the gate config, the reports and the tags: "auc"
    lower_is_better: bool = False  # an error metric: bounded by a ceiling; a fall is an improvement
    unit_interval: bool = False  # its values lie in [0, 1]: plotted on that range
    tfma_config: str = ""  # TFMA's settings for it (a curve's resolution); "": TFMA's defaults


AUC = Metric("AUC", "auc", unit_interval=True, tfma_config=CURVE_THRESHOLDS)
AUC_PRECISION_RECALL = Metric(
    "AUCPrecisionRecall", "auc_precision_recall", unit_interval=True, tfma_config=CURVE_THRESHOLDS
)
BINARY_ACCURACY = Metric("BinaryAccuracy", "binary_accuracy", unit_interval=True)
PRECISION = Metric("Precision", "precision", unit_interval=True)
RECALL = Metric("Recall", "recall", unit_interval=True)
CALIBRATION = Metric("Calibration", "calibration")  # mean prediction / mean label
CALIBRATION_PLOT = Metric("CalibrationPlot", "calibration_plot", tfma_config='"num_buckets": 100')  # a plot
ACCURACY = Metric("SparseCategoricalAccuracy", "sparse_categorical_accuracy", unit_interval=True)
MEAN_SQUARED_ERROR = Metric("MeanSquaredError", "mean_squared_error", lower_is_better=True)
ROOT_MEAN_SQUARED_ERROR = Metric("RootMeanSquaredError", "root_mean_squared_error", lower_is_better=True)
MEAN_ABSOLUTE_ERROR = Metric("MeanAbsoluteError", "mean_absolute_error", lower_is_better=True)
SQUARED_PEARSON_CORRELATION = Metric("SquaredPearsonCorrelation", "squared_pearson_correlation", unit_interval=True)
EXAMPLE_COUNT = Metric("ExampleCount", "example_count")
WEIGHTED_EXAMPLE_COUNT = Metric("WeightedExampleCount", "weighted_example_count")  # rows with a usable label

METRICS = (
    AUC,
    AUC_PRECISION_RECALL,
    BINARY_ACCURACY,
    PRECISION,
    RECALL,
    CALIBRATION,
    CALIBRATION_PLOT,
    ACCURACY,
    MEAN_SQUARED_ERROR,
    ROOT_MEAN_SQUARED_ERROR,
    MEAN_ABSOLUTE_ERROR,
    SQUARED_PEARSON_CORRELATION,
    EXAMPLE_COUNT,
    WEIGHTED_EXAMPLE_COUNT,
)
BY_KEY = {metric.key: metric for metric in METRICS}
BY_TFMA_CLASS = {metric.tfma_class: metric for metric in METRICS}


def averaged_label(metric: Metric, average: str) -> str:
    return f"{metric.key}({average})"


# The kinds of gate. Value gates judge the candidate alone; change gates compare it with the champion.
FLOOR, CEILING, BAND = "floor", "ceiling", "band"  # value: >= floor, <= ceiling, within [low, high]
MAX_DROP = "max_drop"  # change, absolute, overall: candidate - champion >= -limit (<= limit when lower is better)
SLICE_MAX_DROP = "slice_max_drop"  # the same per slice: {"payment_type": limit}
MAX_RELATIVE_INCREASE = "max_relative_increase"  # change: candidate / champion - 1 <= limit (lower is better)
VALUE_KINDS = (FLOOR, CEILING, BAND)


@dataclasses.dataclass(frozen=True)
class Gate:
    """A field of the gate config (``GateConfig``) and the metric it bounds, for one task."""

    field: str
    task: str
    metric: Metric
    kind: str
    average: str = ""  # MACRO: the gate judges the class-averaged value


# In the order the messages list a task's gates.
GATES = (
    Gate("auc_floor", BINARY, AUC, FLOOR),
    Gate("max_auc_drop", BINARY, AUC, MAX_DROP),
    Gate("calibration_band", BINARY, CALIBRATION, BAND),
    Gate("slice_max_auc_drop", BINARY, AUC, SLICE_MAX_DROP),
    Gate("accuracy_floor", MULTICLASS, ACCURACY, FLOOR),  # optional: None, no floor
    Gate("macro_auc_floor", MULTICLASS, AUC, FLOOR, average=MACRO),
    Gate("max_accuracy_drop", MULTICLASS, ACCURACY, MAX_DROP),
    Gate("mse_ceiling", REGRESSION, MEAN_SQUARED_ERROR, CEILING),  # optional: None, no ceiling
    Gate("squared_correlation_floor", REGRESSION, SQUARED_PEARSON_CORRELATION, FLOOR),
    Gate("max_mse_increase", REGRESSION, MEAN_SQUARED_ERROR, MAX_RELATIVE_INCREASE),
)
TASK_GATES = {task: tuple(gate.field for gate in GATES if gate.task == task) for task in TASKS}


@dataclasses.dataclass(frozen=True)
class TaskMetrics:
    """What one task's evaluation computes besides its gated metrics (``GATES``), in the EvalConfig's order."""

    reported: tuple[Metric, ...]  # overall values without a gate of their own
    bounded: tuple[Metric, ...]  # the metrics its gates' value_floors / value_ceilings may name
    per_class: tuple[Metric, ...] = ()  # one value per class (a floor or ceiling holds for every class)
    averaged: tuple[tuple[Metric, str], ...] = ()  # class averages: (metric, MACRO or MICRO)
    headline: tuple[str, ...] = ()  # the labels that sum the task up: the report plots them per slice


EVALUATED = {
    BINARY: TaskMetrics(
        reported=(EXAMPLE_COUNT, AUC_PRECISION_RECALL, BINARY_ACCURACY, PRECISION, RECALL, CALIBRATION_PLOT),
        bounded=(AUC_PRECISION_RECALL, BINARY_ACCURACY, PRECISION, RECALL),
        headline=(AUC.key,),
    ),
    MULTICLASS: TaskMetrics(
        reported=(EXAMPLE_COUNT, WEIGHTED_EXAMPLE_COUNT),
        bounded=(PRECISION, RECALL),
        per_class=(RECALL, PRECISION, AUC),
        averaged=((AUC, MACRO), (AUC, MICRO)),
        headline=(ACCURACY.key, averaged_label(AUC, MACRO)),
    ),
    REGRESSION: TaskMetrics(
        reported=(EXAMPLE_COUNT, WEIGHTED_EXAMPLE_COUNT, MEAN_ABSOLUTE_ERROR, ROOT_MEAN_SQUARED_ERROR),
        bounded=(MEAN_ABSOLUTE_ERROR, ROOT_MEAN_SQUARED_ERROR),  # error metrics: ceilings only
        headline=(MEAN_SQUARED_ERROR.key, MEAN_ABSOLUTE_ERROR.key, ROOT_MEAN_SQUARED_ERROR.key),
    ),
}


# The labels the run report, the HTML report and the registry tags show, in this order (each task's own, by
# presence), then per-class recall, by class (``reported_labels``).
REPORTED = (
    AUC.key,
    AUC_PRECISION_RECALL.key,
    BINARY_ACCURACY.key,
    PRECISION.key,
    RECALL.key,
    CALIBRATION.key,
    ACCURACY.key,
    averaged_label(AUC, MACRO),
    averaged_label(AUC, MICRO),
    MEAN_SQUARED_ERROR.key,
    ROOT_MEAN_SQUARED_ERROR.key,
    MEAN_ABSOLUTE_ERROR.key,
    SQUARED_PEARSON_CORRELATION.key,
    WEIGHTED_EXAMPLE_COUNT.key,
    EXAMPLE_COUNT.key,
)
REPORTED_PER_CLASS = RECALL
# Tagged on the registered version: the reported labels but binary precision and recall (as ever), and no
# per-class value (MLflow tag names take no brackets).
TAGGED = tuple(label for label in REPORTED if label not in (PRECISION.key, RECALL.key))
_PER_CLASS = re.compile(re.escape(REPORTED_PER_CLASS.key) + r"\[class_id=(\d+)\]")


def reported_labels(labels: Iterable[str]) -> list[str]:
    """The labels to show, in ``REPORTED`` order, then per-class recall (``recall[class_id=k]``) by class."""
    present = set(labels)
    per_class = {int(found[1]): m for m in present if (found := _PER_CLASS.fullmatch(m))}
    return [m for m in REPORTED if m in present] + [per_class[k] for k in sorted(per_class)]


def metric_of(label: str) -> Metric | None:
    """The metric a label names (``recall[class_id=2]``, ``auc(macro)``: recall, auc); None if not ours."""
    return BY_KEY.get(re.split(r"[\[(]", label, maxsplit=1)[0])


def lower_is_better(label: str) -> bool:
    metric = metric_of(label)
    return metric is not None and metric.lower_is_better


def in_unit_interval(label: str) -> bool:
    metric = metric_of(label)
    return metric is not None and metric.unit_interval
