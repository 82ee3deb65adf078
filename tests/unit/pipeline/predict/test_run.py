"""The parts of `torchtfx predict` below the command line: its Beam args, the probe that refuses a model before
the Beam work, and the Beam pipeline itself on a multiclass SavedModel with the serving signature's shape."""

from __future__ import annotations

import csv

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
from apache_beam.testing.util import assert_that, equal_to

from torchtfx.components.champion.resolve import Champion
from torchtfx.data.config.task import MULTICLASS
from torchtfx.data.csv_reader.sources import DataSourceError
from torchtfx.pipeline.predict import inference
from torchtfx.pipeline.predict.errors import PredictError
from torchtfx.pipeline.predict.outputs import OutputPlan
from torchtfx.pipeline.predict.run import PredictRequest, beam_args_for, probe
from torchtfx.pipeline.predict.source import check_source
from torchtfx.pipeline.predict.writer import OutputTarget
from torchtfx.pipeline.settings.beam_args import SMALL_INPUT_BYTES, worker_dependency_flag

CLASSES = ("Cash", "Credit Card", "No Charge")


class _Multiclass(tf.Module):
    """serving_default(examples) -> probabilities [batch, 3] (softmax of fare, 1, 0) and classes [batch, 3]."""

    def __init__(self, feature: str):
        super().__init__()
        self._spec = {feature: tf.io.VarLenFeature(tf.float32)}  # a missing value: an empty list, read as 0
        self._feature = feature

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
        fare = tf.sparse.reduce_sum(tf.io.parse_example(examples, self._spec)[self._feature], axis=1)
        logits = tf.stack([fare / 10.0, tf.ones_like(fare), tf.zeros_like(fare)], axis=1)
        classes = tf.tile(tf.constant(CLASSES)[None, :], [tf.shape(fare)[0], 1])
        return {"probabilities": tf.nn.softmax(logits), "classes": classes}


def _saved_model(path, feature: str = "fare") -> Champion:
    module = _Multiclass(feature)
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve.get_concrete_function()})
    return Champion(path, 1, None, "serving_dir")


@pytest.fixture()
def source(tmp_path, taxi_csv, taxi_cfg):
    data = tmp_path / "day.csv"
    data.write_text("\n".join(taxi_csv.read_text().splitlines()[:201]) + "\n")
    return check_source([str(data)], taxi_cfg, ())


def test_beam_args_follow_the_input_size_unless_the_user_gives_a_mode(taxi_cfg):
    request = PredictRequest("in", "out", taxi_cfg, None, "champion", beam_workers=3)
    assert beam_args_for(request, 1000) == ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
    assert beam_args_for(request, SMALL_INPUT_BYTES)[:2] == [
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=3",
    ]
    mine = PredictRequest(
        "in",
        "out",
        taxi_cfg,
        None,
        "champion",
        beam_args=("--direct_running_mode=multi_threading", "--runner=DirectRunner"),
    )
    assert beam_args_for(mine, 10) == ["--direct_running_mode=multi_threading", "--runner=DirectRunner"]
    remote = PredictRequest("in", "out", taxi_cfg, None, "champion", beam_args=("--runner=DataflowRunner",))
    assert beam_args_for(remote, 10)[-1] == worker_dependency_flag()  # the workers get torchtfx


def test_a_model_that_cannot_read_the_rows_is_refused_before_the_beam_work(source, tmp_path):
    model = _saved_model(tmp_path / "model", feature="payment_type")  # a string column read as a float
    with pytest.raises(
        PredictError,
        match=r"cannot score the rows of .*day\.csv: its serving_default failed on the "
        r"first 8 rows \(.*\)\. Nothing was written",
    ):
        probe(source, source.parts([])[0], model)


def test_the_beam_pipeline_scores_every_row_with_the_multiclass_outputs(source, tmp_path, taxi_csv):
    model = _saved_model(tmp_path / "model")
    parts = source.parts(["--direct_running_mode=in_memory"])
    plan = OutputPlan.from_probe((), MULTICLASS, probe(source, parts[0], model))
    assert plan.classes == CLASSES
    target = OutputTarget.for_out(str(tmp_path / "scores.csv"), None)
    with beam.Pipeline() as pipeline:
        rows = inference.scored_rows(pipeline, parts, source, str(model.saved_model_dir), plan, as_csv=True)
        _ = rows | target.sink(plan)
    target.publish(plan)
    with (tmp_path / "scores.csv").open(newline="") as handle:
        written = sorted(csv.DictReader(handle), key=lambda row: int(row["source_line"]))
    assert [int(row["source_line"]) for row in written] == list(range(2, 202))
    with (tmp_path / "day.csv").open(newline="") as handle:
        fares = np.array([float(row["fare"] or 0) for row in csv.DictReader(handle)], np.float32)
    logits = np.stack([fares / np.float32(10), np.ones_like(fares), np.zeros_like(fares)], axis=1)
    expected = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    scored = np.array([[float(row[f"probabilities_{name}"]) for name in CLASSES] for row in written])
    assert np.max(np.abs(scored - expected)) <= 1e-6
    assert [row["predicted_class"] for row in written] == [CLASSES[i] for i in expected.argmax(axis=1)]


def test_a_text_model_is_called_on_at_most_65536_token_ids_per_call(source, tmp_path):
    model = _saved_model(tmp_path / "model")
    parts = source.parts(["--direct_running_mode=in_memory"])
    plan = OutputPlan.from_probe((), MULTICLASS, probe(source, parts[0], model))
    with beam.Pipeline() as pipeline:
        rows = inference.scored_rows(pipeline, parts, source, str(model.saved_model_dir), plan, True, tokens=1024)
        assert_that(rows | beam.Map(lambda text: len(text.split("\n"))), equal_to([64, 64, 64, 8]))


def test_a_file_changed_after_the_checks_stops_the_scoring_by_file_and_lines(source, tmp_path):
    model = _saved_model(tmp_path / "model")
    parts = source.parts(["--direct_running_mode=in_memory"])
    plan = OutputPlan.from_probe((), MULTICLASS, probe(source, parts[0], model))
    data = tmp_path / "day.csv"
    lines = data.read_text().splitlines()
    header = next(csv.reader([lines[0]]))
    cells = next(csv.reader([lines[5]]))
    cells[header.index("fare")] = "ten dollars"  # a FLOAT cell that is not a number, written after the checks
    lines[5] = ",".join(cells)
    data.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataSourceError, match=r"day\.csv, lines 2-9: column 'fare' holds a value that is not a number"):
        probe(source, parts[0], model)  # the probe's first rows, named the same way
    with pytest.raises(Exception, match=r"day\.csv, lines 2-201: column 'fare' holds a value that is not a number now"):
        with beam.Pipeline() as pipeline:
            _ = inference.scored_rows(pipeline, parts, source, str(model.saved_model_dir), plan, as_csv=True)
