"""The written columns: keys, then the task's outputs, with float32 values that read back exactly."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from torchtfx.data.config.task import BINARY, MULTICLASS, REGRESSION
from torchtfx.pipeline.predict.errors import PredictError
from torchtfx.pipeline.predict.outputs import OutputPlan, ScoredRows


def test_binary_rows_are_keyed_by_file_and_line_without_key_columns():
    plan = OutputPlan.from_probe((), BINARY, {"probabilities": np.array([0.25, 0.5], np.float32)})
    assert plan.names == ["source_file", "source_line", "probabilities"]
    rows = ScoredRows("in/day 1.csv", [7, 9], [(), ()], {"probabilities": np.array([0.1, 0.2], np.float32)})
    assert plan.table(rows).to_pylist() == [
        {"source_file": "in/day 1.csv", "source_line": 7, "probabilities": pytest.approx(0.1, abs=1e-8)},
        {"source_file": "in/day 1.csv", "source_line": 9, "probabilities": pytest.approx(0.2, abs=1e-8)},
    ]
    assert plan.csv_text(rows) == "in/day 1.csv,7,0.1\nin/day 1.csv,9,0.2"


def test_key_columns_replace_file_and_line_and_csv_cells_are_quoted():
    plan = OutputPlan.from_probe(("trip_id", "company"), REGRESSION, {"predictions": np.zeros(3, np.float32)})
    assert plan.names == ["trip_id", "company", "predictions"]
    rows = ScoredRows(
        "f.csv", [2, 3], [("17", 'Cab, "Inc."'), ("18", "two\nlines")], {"predictions": np.float32([1.5, 2])}
    )
    text = plan.csv_text(rows)
    assert list(csv.reader(io.StringIO(text))) == [["17", 'Cab, "Inc."', "1.5"], ["18", "two\nlines", "2.0"]]
    assert not text.endswith("\n")  # the text sink ends each element's last line
    assert plan.csv_header == "trip_id,company,predictions"


def test_csv_floats_read_back_as_the_same_float32():
    plan = OutputPlan.from_probe((), BINARY, {"probabilities": np.zeros(1, np.float32)})
    values = np.random.default_rng(0).random(1000, dtype=np.float32) ** 7  # down to 1e-20 and below
    lines = list(range(2, 1002))
    text = plan.csv_text(ScoredRows("f", lines, [()] * 1000, {"probabilities": values}))
    written = [line.split(",")[-1] for line in text.split("\n")]
    assert np.array_equal(np.float32([float(t) for t in written]), values)
    assert all(len(t) <= 15 for t in written)  # the shortest decimal, not float64's 17 digits


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
    scores = np.array([[0.2, 0.7, 0.1], [0.5, 0.2, 0.3]], np.float32)
    columns = plan.cells(ScoredRows("f", [3, 4], [(), ()], {"probabilities": scores, "classes": probe["classes"]}))
    assert columns[:3] == [["f", "f"], [3, 4], ["Credit Card", "Cash"]]
    assert np.array(columns[3:]).T.tolist() == scores.tolist()
    assert [str(t) for t in plan.arrow_schema().types] == ["string", "int64", "string", "float", "float", "float"]


def test_a_model_without_the_tasks_output_is_refused_by_name():
    with pytest.raises(PredictError, match=r"returns \['predictions'\], not the binary task's 'probabilities'"):
        OutputPlan.from_probe((), BINARY, {"predictions": np.zeros(2, np.float32)})
    with pytest.raises(PredictError, match="no 'classes'"):
        OutputPlan.from_probe((), MULTICLASS, {"probabilities": np.zeros((2, 3), np.float32)})
