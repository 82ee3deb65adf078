"""The written columns: keys, then the task's outputs, with float32 values that read back exactly."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from torchtfx.data.config.task import BINARY, MULTICLASS, REGRESSION
from torchtfx.pipeline.predict.errors import PredictError
from torchtfx.pipeline.predict.outputs import OutputPlan


def test_binary_rows_are_keyed_by_file_and_line_without_key_columns():
    plan = OutputPlan.from_probe((), BINARY, {"probabilities": np.array([0.25, 0.5], np.float32)})
    assert plan.names == ["source_file", "source_line", "probabilities"]
    key = ("in/day 1.csv", 7, ())
    assert plan.record(key, {"probabilities": np.float32(0.1)}) == {
        "source_file": "in/day 1.csv",
        "source_line": 7,
        "probabilities": pytest.approx(0.1, abs=1e-8),
    }


def test_key_columns_replace_file_and_line_and_csv_cells_are_quoted():
    plan = OutputPlan.from_probe(("trip_id", "company"), REGRESSION, {"predictions": np.zeros(3, np.float32)})
    assert plan.names == ["trip_id", "company", "predictions"]
    line = plan.csv_line(("f.csv", 2, ("17", 'Cab, "Inc."')), {"predictions": np.float32(1.5)})
    assert next(csv.reader(io.StringIO(line))) == ["17", 'Cab, "Inc."', "1.5"]
    assert plan.csv_header == "trip_id,company,predictions"


def test_csv_floats_read_back_as_the_same_float32():
    plan = OutputPlan.from_probe((), BINARY, {"probabilities": np.zeros(1, np.float32)})
    values = np.random.default_rng(0).random(1000, dtype=np.float32) ** 7  # down to 1e-20 and below
    for value in values:
        text = plan.csv_line(("f", 1, ()), {"probabilities": value}).split(",")[-1]
        assert np.float32(float(text)) == value


def test_multiclass_writes_the_predicted_class_and_one_probability_per_class():
    probe = {
        "probabilities": np.array([[0.2, 0.7, 0.1]], np.float32),
        "classes": np.array([[b"Cash", b"Credit Card", b"Other"]]),
    }
    plan = OutputPlan.from_probe((), MULTICLASS, probe)
    assert plan.names == [
        "source_file",
        "source_line",
        "predicted_class",
        "probabilities_Cash",
        "probabilities_Credit Card",
        "probabilities_Other",
    ]
    row = plan.values(("f", 3, ()), {"probabilities": probe["probabilities"][0], "classes": probe["classes"][0]})
    assert row[:3] == ["f", 3, "Credit Card"] and row[3:] == pytest.approx([0.2, 0.7, 0.1])
    assert [str(t) for t in plan.arrow_schema().types] == ["string", "int64", "string", "float", "float", "float"]


def test_a_model_without_the_tasks_output_is_refused_by_name():
    with pytest.raises(PredictError, match=r"returns \['predictions'\], not the binary task's 'probabilities'"):
        OutputPlan.from_probe((), BINARY, {"predictions": np.zeros(2, np.float32)})
    with pytest.raises(PredictError, match="no 'classes'"):
        OutputPlan.from_probe((), MULTICLASS, {"probabilities": np.zeros((2, 3), np.float32)})
