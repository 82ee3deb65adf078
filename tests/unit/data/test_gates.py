"""Gate settings: metric floors and ceilings by the names the report prints, refused when unknown or when
they would contradict a gate of their own; command-line overrides."""

from __future__ import annotations

import pytest

from tests.paths import PROJECT_ROOT
from torchtfx.data.config.dataset import DatasetConfigError, load_dataset_config
from torchtfx.data.config.gates import GateConfig, GateConfigError
from torchtfx.data.config.metrics import TASK_GATES


def test_metric_floors_and_ceilings_are_accepted_and_keyed_by_tfma_class():
    """The operator-precedence bug refused every value_floors entry; floors and ceilings both work now."""
    gates = GateConfig(value_floors={"precision": 0.5, "BinaryAccuracy": 0.8}, value_ceilings={"recall": 0.99})
    assert gates.value_floors == {"Precision": 0.5, "BinaryAccuracy": 0.8}
    assert gates.value_ceilings == {"Recall": 0.99}


@pytest.mark.parametrize(
    ("bounds", "message"),
    [
        ({"value_floors": {"precison": 0.5}}, "unknown metric 'precison'; metrics that take a floor or ceiling"),
        ({"value_ceilings": {"f1": 0.5}}, "unknown metric 'f1'"),
        ({"value_floors": {"auc": 0.8}}, "'auc' has its own gate: set auc_floor (binary) or macro_auc_floor (multi"),
        ({"value_floors": {"accuracy": 0.8}}, "'accuracy' has its own gate: set accuracy_floor (multiclass; binary_ac"),
        ({"value_floors": {"squared_pearson_correlation": 0.3}}, "set squared_correlation_floor instead"),
        ({"value_ceilings": {"Calibration": 1.2}}, "'Calibration' has its own gate: set calibration_band instead"),
        (
            {"value_floors": {"recall": 0.9}, "value_ceilings": {"recall": 0.8}},
            "value_floors above value_ceilings for recall: no model can pass",
        ),
        ({"macro_auc_floor": 1.5}, "macro_auc_floor: Input should be less than or equal to 1"),
        ({"accuracy_floor": -0.1}, "accuracy_floor: Input should be greater than or equal to 0"),
        ({"max_accuracy_drop": -0.01}, "max_accuracy_drop: Input should be greater than or equal to 0"),
        ({"mse_ceiling": 0.0}, "mse_ceiling: Input should be greater than 0"),
        ({"max_mse_increase": -0.05}, "max_mse_increase: Input should be greater than or equal to 0"),
        ({"squared_correlation_floor": 1.1}, "squared_correlation_floor: Input should be less than or equal to 1"),
        ({"calibration_band": (1.2, 0.8)}, "must satisfy 0 < low < high"),
        ({"auc_floor": 1.2}, "auc_floor: Input should be less than or equal to 1"),
        ({"max_auc_drop": -0.1}, "max_auc_drop: Input should be greater than or equal to 0"),
        ({"slice_max_auc_drop": {"payment_type": -1}}, "slice_max_auc_drop.payment_type: Input should be greater"),
    ],
)
def test_bad_gates_are_refused_by_name(bounds, message):
    with pytest.raises(GateConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        GateConfig(**bounds)


@pytest.mark.parametrize(
    ("task", "gates", "message"),
    [
        ("regression", {"auc_floor": 0.8}, "gates.auc_floor applies to binary tasks only; for a regression task use"),
        ("binary", {"max_mse_increase": 0.2}, "gates.max_mse_increase applies to regression tasks only"),
        ("regression", {"max_accuracy_drop": 0.0}, "gates.max_accuracy_drop applies to multiclass tasks only"),
        (
            "multiclass",
            {"value_floors": {"binary_accuracy": 0.8}},
            "gates.value_floors names binary_accuracy, not a multiclass metric; multiclass takes: precision, recall",
        ),
        ("regression", {"value_ceilings": {"recall": 0.9}}, "regression takes: mean_absolute_error, root_mean_sq"),
        (
            "binary",
            {"value_ceilings": {"mean_absolute_error": 2.0}},
            "gates.value_ceilings names mean_absolute_error, "
            "not a binary metric; binary takes: auc_precision_recall, binary_accuracy, precision, recall",
        ),
        (
            "regression",
            {"value_floors": {"mean_absolute_error": 0.1}},
            "gates.value_floors names mean_absolute_error: "
            "an error metric is better when lower, so it takes a ceiling (value_ceilings), not a floor",
        ),
    ],
)
def test_a_gate_for_another_task_is_refused_naming_the_task_s_own_gates(task, gates, message):
    assert any(message in p for p in GateConfig(**gates).problems_for(task))


def test_each_task_s_own_gates_pass_and_regression_ceilings_take_error_metrics():
    assert GateConfig(accuracy_floor=0.6, max_accuracy_drop=0.02).problems_for("multiclass") == []
    gates = GateConfig(mse_ceiling=4.0, value_ceilings={"mean_absolute_error": 1.5})
    assert gates.problems_for("regression") == [] and gates.value_ceilings == {"MeanAbsoluteError": 1.5}
    assert GateConfig().problems_for("binary") == GateConfig().problems_for("regression") == []


def test_own_gates_of_new_tasks_cannot_be_set_twice():
    with pytest.raises(GateConfigError, match="'mean_squared_error' has its own gate: set mse_ceiling"):
        GateConfig(value_ceilings={"mean_squared_error": 2.0})


_CHANGED = {
    "auc_floor": 0.8,
    "max_auc_drop": 0.05,
    "calibration_band": (0.5, 1.5),
    "slice_max_auc_drop": {"payment_type": 0.1},
    "accuracy_floor": 0.6,
    "macro_auc_floor": 0.8,
    "max_accuracy_drop": 0.02,
    "mse_ceiling": 4.0,
    "squared_correlation_floor": 0.3,
    "max_mse_increase": 0.1,
}


@pytest.mark.parametrize(
    ("task", "field"),
    [(task, field) for task in TASK_GATES for other, fields in TASK_GATES.items() if other != task for field in fields],
)
def test_every_gate_of_another_task_is_refused_naming_the_field_its_task_and_the_fix(task, field):
    owner = next(t for t, fields in TASK_GATES.items() if field in fields)
    (problem,) = GateConfig(**{field: _CHANGED[field]}).problems_for(task)
    fix = ", ".join(TASK_GATES[task])
    assert problem == f"gates.{field} applies to {owner} tasks only; for a {task} task use {fix}"


def test_every_task_has_a_value_gate_and_a_change_gate_by_default():
    """Binary: AUC floor and calibration band, AUC drop; multiclass: macro AUC floor, accuracy drop; regression:
    squared-correlation floor, relative MSE increase (an MSE ceiling depends on the target's scale: opt-in)."""
    gates = GateConfig()
    assert (gates.auc_floor, gates.calibration_band, gates.max_auc_drop) == (0.75, (0.75, 1.25), 0.01)
    assert (gates.macro_auc_floor, gates.accuracy_floor, gates.max_accuracy_drop) == (0.7, None, 0.01)
    assert (gates.squared_correlation_floor, gates.mse_ceiling, gates.max_mse_increase) == (0.1, None, 0.05)
    assert set(_CHANGED) == {f for fields in TASK_GATES.values() for f in fields}


def test_multiclass_takes_per_class_precision_and_recall_bounds():
    gates = GateConfig(value_floors={"recall": 0.4}, value_ceilings={"precision": 0.999})
    assert gates.problems_for("multiclass") == []
    assert gates.value_floors == {"Recall": 0.4} and gates.value_ceilings == {"Precision": 0.999}


def test_a_json_round_trip_keeps_a_task_s_own_gates_valid():
    """problems_for compares with the defaults, not with the fields set: the JSON the executors get sets all."""
    gates = GateConfig(mse_ceiling=4.0, max_mse_increase=0.1, value_ceilings={"root_mean_squared_error": 2.0})
    again = GateConfig.from_json(gates.to_json())
    assert again == gates and again.problems_for("regression") == []


def test_a_dataset_yaml_with_another_task_s_gate_is_refused_by_name(tmp_path):
    yaml_path = tmp_path / "tips.yaml"
    yaml_path.write_text(
        (PROJECT_ROOT / "data" / "datasets" / "taxi_tips.yaml").read_text() + "gates:\n  auc_floor: 0.8\n"
    )
    with pytest.raises(DatasetConfigError, match=r"gates\.auc_floor applies to binary tasks only; for a regression"):
        load_dataset_config(yaml_path)
    for name in ("taxi", "taxi_payment", "taxi_tips"):  # the shipped datasets pass their own task's check
        dataset = load_dataset_config(name)
        assert dataset.gates.problems_for(dataset.task) == []
        assert type(dataset).from_json(dataset.to_json()).gates == dataset.gates
