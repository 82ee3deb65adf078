"""Gate settings: metric floors and ceilings by the names the report prints, refused when unknown or when
they would contradict a gate of their own; command-line overrides."""

from __future__ import annotations

import pytest

from torchtfx.data.config.gates import GateConfig, GateConfigError


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
        ({"value_floors": {"auc": 0.8}}, "'auc' has its own gate: set auc_floor instead"),
        ({"value_ceilings": {"Calibration": 1.2}}, "'Calibration' has its own gate: set calibration_band instead"),
        ({"value_floors": {"recall": 0.9}, "value_ceilings": {"recall": 0.8}}, "value_floors above value_ceilings"),
        ({"calibration_band": (1.2, 0.8)}, "must satisfy 0 < low < high"),
        ({"auc_floor": 1.2}, "auc_floor: Input should be less than or equal to 1"),
        ({"max_auc_drop": -0.1}, "max_auc_drop: Input should be greater than or equal to 0"),
        ({"slice_max_auc_drop": {"payment_type": -1}}, "slice_max_auc_drop.payment_type: Input should be greater"),
    ],
)
def test_bad_gates_are_refused_by_name(bounds, message):
    with pytest.raises(GateConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        GateConfig(**bounds)


def test_overrides_replace_only_what_was_given():
    gates = GateConfig(auc_floor=0.8, value_floors={"precision": 0.5})
    assert gates.with_overrides(auc_floor=None, max_auc_drop=None) == gates
    changed = gates.with_overrides(auc_floor=0.9, max_auc_drop=None)
    assert (changed.auc_floor, changed.max_auc_drop, changed.value_floors) == (0.9, 0.01, {"Precision": 0.5})
    with pytest.raises(GateConfigError, match="auc_floor"):
        gates.with_overrides(auc_floor=3.0)


@pytest.mark.parametrize(
    ("task", "gates", "message"),
    [
        ("regression", {"auc_floor": 0.8}, "gates.auc_floor applies to binary tasks only; for a regression task use"),
        ("binary", {"max_mse_increase": 0.2}, "gates.max_mse_increase applies to regression tasks only"),
        ("regression", {"max_accuracy_drop": 0.0}, "gates.max_accuracy_drop applies to multiclass tasks only"),
        ("multiclass", {"value_floors": {"precision": 0.5}}, "gates.value_floors names Precision, not a multiclass"),
        ("regression", {"value_ceilings": {"recall": 0.9}}, "regression takes: mean_absolute_error, root_mean_sq"),
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
