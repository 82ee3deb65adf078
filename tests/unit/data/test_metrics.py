"""The evaluation metrics' declarations: what the gates, the EvalConfig and the reports derive from them."""

from __future__ import annotations

import pytest

from torchtfx.data.config import metrics
from torchtfx.data.config.gates import GateConfig
from torchtfx.data.config.task import TASKS


def test_reported_metrics_keep_binary_s_order_and_list_classes_by_id():
    binary = ["example_count", "calibration", "recall", "precision", "binary_accuracy", "auc_precision_recall", "auc"]
    assert metrics.reported_labels(binary) == list(reversed(binary))  # as the console always printed them
    multiclass = [
        "recall[class_id=10]",
        "recall[class_id=2]",
        "auc(micro)",
        "sparse_categorical_accuracy",
        "precision[class_id=0]",
        "auc(macro)",
        "example_count",
    ]
    assert metrics.reported_labels(multiclass) == [
        "sparse_categorical_accuracy",
        "auc(macro)",
        "auc(micro)",
        "example_count",
        "recall[class_id=2]",
        "recall[class_id=10]",
    ]
    regression = ["mean_absolute_error", "root_mean_squared_error", "mean_squared_error", "weighted_example_count"]
    assert metrics.reported_labels(regression) == [
        "mean_squared_error",
        "root_mean_squared_error",
        "mean_absolute_error",
        "weighted_example_count",
    ]


def test_every_declared_name_is_unique_and_every_reported_label_names_a_declared_metric():
    assert len(metrics.BY_KEY) == len(metrics.BY_TFMA_CLASS) == len(metrics.METRICS)
    assert all(metrics.metric_of(label) is not None for label in metrics.REPORTED)
    headline = [label for task in TASKS for label in metrics.EVALUATED[task].headline]
    assert set(headline) <= set(metrics.REPORTED)


@pytest.mark.parametrize(
    ("label", "lower", "unit"),
    [
        ("mean_squared_error", True, False),
        ("auc(macro)", False, True),
        ("recall[class_id=2]", False, True),
        ("calibration", False, False),
        ("not_ours", False, False),
    ],
)
def test_a_label_is_judged_by_its_metric(label, lower, unit):
    assert (metrics.lower_is_better(label), metrics.in_unit_interval(label)) == (lower, unit)


def test_every_gate_names_a_field_of_the_gate_config_and_a_metric_its_task_computes():
    fields = set(GateConfig.model_fields)
    for gate in metrics.GATES:
        assert gate.field in fields, gate
        evaluated = metrics.EVALUATED[gate.task]
        assert gate.average == "" or (gate.metric, gate.average) in evaluated.averaged, gate
    for task in TASKS:  # a task's value floors and ceilings name metrics it computes
        evaluated = metrics.EVALUATED[task]
        assert set(evaluated.bounded) <= set(evaluated.reported) | set(evaluated.per_class)


def test_tags_are_the_reported_labels_but_binary_precision_and_recall():
    assert set(metrics.REPORTED) - set(metrics.TAGGED) == {"precision", "recall"}
