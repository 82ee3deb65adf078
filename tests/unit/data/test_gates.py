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
