"""ONNX's own backend tests (in the onnx wheel) through the translator: the issue's targets, and no test failing
for a reason not written down in KNOWN_DIFFERENCES (any other failure is a regression)."""

from __future__ import annotations

import os

import onnx
from onnx import TensorProto, helper

from torchtfx.components.converter import conformance


def test_the_suites_meet_the_targets_and_fail_only_for_known_reasons():
    results = conformance.run_suites(conformance.SUITES, jobs=min(4, os.cpu_count() or 1))
    figures = conformance.suite_figures(results)
    assert figures["node"]["included"] > 1100 and figures["pytorch-converted"]["included"] == 82
    assert conformance.meets_targets(results) == [], conformance.render(results)


def test_the_exclusions_are_the_stated_kinds_only():
    def model(elem_type: int, op: str = "Identity", domain: str = "") -> onnx.ModelProto:
        value = helper.make_tensor_value_info
        graph = helper.make_graph(
            [helper.make_node(op, ["x"], ["y"], domain=domain)],
            "g",
            [value("x", elem_type, [2])],
            [value("y", elem_type, [2])],
        )
        return helper.make_model(graph)

    assert conformance.exclusion("test_x", model(TensorProto.FLOAT)) is None
    assert conformance.exclusion("test_x", model(TensorProto.BFLOAT16)) == "bfloat16"
    assert conformance.exclusion("test_x", model(TensorProto.FLOAT8E4M3FN)) == "float8"
    assert conformance.exclusion("test_x", model(TensorProto.INT4)) == "int4"
    assert conformance.exclusion("test_x", model(TensorProto.STRING)) == "string tensors"
    assert conformance.exclusion("test_x_training_mode", model(TensorProto.FLOAT)) == "training mode"
    assert conformance.exclusion("test_x", model(TensorProto.FLOAT, "LabelEncoder", "ai.onnx.ml")).startswith("domain")


def test_a_failing_test_outside_the_known_list_misses_the_targets():
    broken = conformance.CaseResult("node", "test_abs", ["Abs"], "failed", "wrong values")
    assert conformance.meets_targets([broken]) and "test_abs does not pass" in conformance.meets_targets([broken])[-1]


def test_every_float32_node_test_runs_in_a_float16_network_within_its_precision():
    """The reduced-precision network (serving.precision: float16) on every operator ONNX's suite tests in float32:
    float16 compute, float32 in and out, within 2e-2 of the largest value; only values float16 cannot hold fail."""
    results = conformance.run_suites(["node"], jobs=min(4, os.cpu_count() or 1), float16=True)
    assert conformance.suite_figures(results)["node"]["passed"] > 900
    assert conformance.meets_targets(results, float16=True) == [], conformance.render(results)
