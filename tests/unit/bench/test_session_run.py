"""``tests/bench/session_run``: the C harness that times a SavedModel signature through TF's C API (the call TF
Serving makes), compiled here against the installed TensorFlow, on tiny networks (tabular, and with token ids of
any length after an empty dense input) and a string signature; and the op profile of a saved network."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.bench import session_run

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    return session_run.build(tmp_path_factory.mktemp("harness"))


class _Network(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = tf.Variable(np.arange(12, dtype=np.float32).reshape(6, 2))

    def __call__(self, dense, categorical):
        return [tf.reduce_sum(dense, 1) + tf.reduce_sum(tf.gather(self.table, categorical[:, 0]), 1)]


def _tabular(rows: int) -> dict[str, np.ndarray]:
    return {
        "dense": np.ones([rows, 3], np.float32),
        "categorical": np.arange(rows, dtype=np.int64).reshape(rows, 1) % 6,
    }


def test_a_saved_network_is_timed_at_each_batch_by_tf_session_run(tmp_path, binary):
    feeds = _tabular(64)
    saved = session_run.save_network(_Network(), session_run.input_specs(feeds), tmp_path / "network")
    with session_run.SessionRun(binary, saved, feeds, tmp_path, 1) as run:
        for batch in (1, 64):
            times = run.times(batch, 0.05, 7)
            assert len(times) >= 7 and all(t > 0 for t in times)
        assert len(run.timer(32)(0.0, 3)) == 3


class _Parse(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
        parsed = tf.io.parse_example(examples, {"x": tf.io.FixedLenFeature([], tf.float32)})
        return {"y": parsed["x"] * 2.0}


def _parse_model(directory) -> list[bytes]:
    """A SavedModel whose ``serving_default`` parses tf.Examples, and 10 of them."""
    module = _Parse()
    tf.saved_model.save(module, str(directory), signatures={"serving_default": module.serve})
    return [
        tf.train.Example(
            features=tf.train.Features(feature={"x": tf.train.Feature(float_list=tf.train.FloatList(value=[float(i)]))})
        ).SerializeToString()
        for i in range(10)
    ]


def test_a_string_signature_is_fed_serialized_examples(tmp_path, binary):
    examples = _parse_model(tmp_path / "parse")
    with session_run.SessionRun(binary, tmp_path / "parse", {"examples": examples}, tmp_path / "rows", 1) as run:
        assert len(run.times(10, 0.0, 5)) == 5


def test_the_tabular_benchmarks_timers_run_the_network_the_floor_and_the_signature(tmp_path, binary):
    import contextlib

    from tests.bench.serving_bench import session_timers

    examples, feeds = _parse_model(tmp_path / "parse"), _tabular(10)
    with contextlib.ExitStack() as stack:
        runs, unavailable = session_timers(
            _Network(), tmp_path / "parse", examples, feeds["dense"], feeds["categorical"], tmp_path / "c_api", stack
        )
        assert unavailable is None
        assert sorted(runs) == ["converted_network_session", "savedmodel_signature_session", "tf_session_floor"]
        assert all(len(run.timer(10)(0.0, 2)) == 2 for run in runs.values())


class _KerasLike(tf.Module):
    """The reference's served signature in miniature (TFX's taxi ``_get_tf_examples_serving_signature``): a
    ``serving_default`` whose one input is named ``examples`` by its TensorSpec, not by its argument, parsing a
    float feature (rows carrying more features than it parses, as our eval rows carry the label) into ``outputs``."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve_tf_examples_fn(self, serialized_tf_example):
        parsed = tf.io.parse_example(serialized_tf_example, {"x": tf.io.FixedLenFeature([], tf.float32)})
        return {"outputs": tf.sigmoid(parsed["x"])}


def _keras_like_model(directory):
    module = _KerasLike()
    tf.saved_model.save(module, str(directory), signatures={"serving_default": module.serve_tf_examples_fn})
    return directory


def _examples_with_a_label(rows: int) -> list[bytes]:
    def example(i: int) -> bytes:
        floats = {"x": float(i), "tips": 0.5}
        feature = {k: tf.train.Feature(float_list=tf.train.FloatList(value=[v])) for k, v in floats.items()}
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

    return [example(i) for i in range(rows)]


def test_the_reference_signature_is_timed_beside_ours_and_both_are_profiled(tmp_path, binary):
    import contextlib

    from tests.bench.serving_bench import examples_call, session_timers, signature_profiles

    _parse_model(tmp_path / "ours")
    reference, examples, feeds = _keras_like_model(tmp_path / "reference"), _examples_with_a_label(10), _tabular(10)
    assert session_run.signature_inputs(reference) == ["examples"]
    outputs = examples_call(reference)(tf.constant(examples[:3]))["outputs"].numpy()
    np.testing.assert_allclose(outputs, 1 / (1 + np.exp(-np.arange(3.0))), rtol=1e-6)
    with contextlib.ExitStack() as stack:
        runs, unavailable = session_timers(
            _Network(),
            tmp_path / "ours",
            examples,
            feeds["dense"],
            feeds["categorical"],
            tmp_path / "c_api",
            stack,
            reference,
        )
        assert unavailable is None and "reference_signature_session" in runs
        assert all(len(run.timer(batch)(0.0, 2)) == 2 for run in runs.values() for batch in (1, 10))
    profiles = signature_profiles({"ours": tmp_path / "ours", "reference": reference}, examples, 1, (1, 10))
    for name in ("ours", "reference"):
        for batch in ("1", "10"):
            found = profiles[name][batch]
            assert found["wall_ms"] > 0 and len(found["ops"]) <= 8 and len(found["top_nodes"]) <= 5
            assert any(op.startswith("ParseExample") for op in found["ops"]) and found["stages"]["parse"] > 0
            assert found["traced_ms_per_call"] >= sum(v["ms_per_call"] for v in found["ops"].values()) - 1e-9


def test_a_failing_run_is_reported_with_tensorflows_message(tmp_path, binary):
    saved = session_run.save_network(_Network(), session_run.input_specs(_tabular(1)), tmp_path / "network")
    bad_ids = np.full([4, 1], 99, np.int64)  # outside the 6-row table: the gather refuses it
    with session_run.SessionRun(
        binary, saved, {"dense": np.ones([4, 3], np.float32), "categorical": bad_ids}, tmp_path, 1
    ) as run:
        with pytest.raises(session_run.SessionRunUnavailable, match=r"TF_SessionRun: .*indices"):
            run.times(4, 0.0, 1)


class _TextNetwork(tf.Module):
    """A text model's inputs: dense [batch, 0] (no dense features), categorical, token ids [batch, length]."""

    def __call__(self, dense, categorical, ids):
        tokens = tf.reduce_sum(tf.cast(tf.not_equal(ids, 0), tf.float32), 1)
        return [tokens + tf.reduce_sum(dense, 1) + tf.cast(categorical[:, 0], tf.float32)]


def _text_feeds(rows: int, length: int) -> dict[str, np.ndarray]:
    return {
        "dense": np.zeros([rows, 0], np.float32),
        "categorical": np.zeros([rows, 1], np.int64),
        "text_xf": np.ones([rows, length], np.int64),
    }


def test_one_saved_graph_serves_token_ids_of_every_length_beside_an_empty_dense_input(tmp_path, binary):
    specs = session_run.input_specs(_text_feeds(1, 4), any_length=("text_xf",))
    assert [s.shape.as_list() for s in specs] == [[None, 0], [None, 1], [None, None]]
    saved = session_run.save_network(_TextNetwork(), specs, tmp_path / "network")
    for length in (4, 9):
        with session_run.SessionRun(binary, saved, _text_feeds(8, length), tmp_path / str(length), 1) as run:
            assert len(run.times(8, 0.0, 3)) == 3 and len(run.times(1, 0.0, 2)) == 2


def test_a_batch_larger_than_the_written_rows_is_refused_by_name(tmp_path, binary):
    specs = session_run.input_specs(_text_feeds(1, 4), any_length=("text_xf",))
    saved = session_run.save_network(_TextNetwork(), specs, tmp_path / "network")
    with session_run.SessionRun(binary, saved, _text_feeds(8, 4), tmp_path, 1) as run:
        with pytest.raises(session_run.SessionRunUnavailable, match=r"feed .* holds fewer than 9 rows"):
            run.times(9, 0.0, 1)


def test_the_op_profile_sums_each_op_types_nodes_per_call(tmp_path):
    specs = session_run.input_specs(_text_feeds(1, 4), any_length=("text_xf",))
    saved = session_run.save_network(_TextNetwork(), specs, tmp_path / "network")
    profile = session_run.op_profile(saved, _text_feeds(16, 32), threads=1, calls=3)
    assert profile["wall_ms"] > 0
    assert {"NotEqual", "Sum"} <= set(profile["ops"])
    assert all(v["ms_per_call"] >= 0 and v["nodes"] >= 1 for v in profile["ops"].values())
    times = [v["ms_per_call"] for v in profile["ops"].values()]
    assert times == sorted(times, reverse=True)
