"""``bench/session_run``: the C harness that times a SavedModel signature through TF's C API (the call TF
Serving makes), compiled here against the installed TensorFlow, on a tiny network and a string signature."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import tensorflow as tf

from bench import session_run

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


def test_a_saved_network_is_timed_at_each_batch_by_tf_session_run(tmp_path, binary):
    saved = session_run.save_network(_Network(), 3, 1, tmp_path / "network")
    dense = np.ones([64, 3], np.float32)
    categorical = np.arange(64, dtype=np.int64).reshape(64, 1) % 6
    with session_run.SessionRun(binary, saved, {"dense": dense, "categorical": categorical}, tmp_path, 1) as run:
        for batch in (1, 64):
            times = run.times(batch, 0.05, 7)
            assert len(times) >= 7 and all(t > 0 for t in times)
        assert len(run.timer(32)(0.0, 3)) == 3


def test_a_string_signature_is_fed_serialized_examples(tmp_path, binary):
    class Parse(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def serve(self, examples):
            parsed = tf.io.parse_example(examples, {"x": tf.io.FixedLenFeature([], tf.float32)})
            return {"y": parsed["x"] * 2.0}

    module = Parse()
    tf.saved_model.save(module, str(tmp_path / "parse"), signatures={"serving_default": module.serve})
    examples = [
        tf.train.Example(features=tf.train.Features(feature={"x": tf.train.Feature(
            float_list=tf.train.FloatList(value=[float(i)]))})).SerializeToString()
        for i in range(10)
    ]  # fmt: skip
    with session_run.SessionRun(binary, tmp_path / "parse", {"examples": examples}, tmp_path / "rows", 1) as run:
        assert len(run.times(10, 0.0, 5)) == 5


def test_a_failing_run_is_reported_with_tensorflows_message(tmp_path, binary):
    saved = session_run.save_network(_Network(), 3, 1, tmp_path / "network")
    bad_ids = np.full([4, 1], 99, np.int64)  # outside the 6-row table: the gather refuses it
    with session_run.SessionRun(binary, saved, {"dense": np.ones([4, 3], np.float32), "categorical": bad_ids},
                                tmp_path, 1) as run:  # fmt: skip
        with pytest.raises(session_run.SessionRunUnavailable, match=r"TF_SessionRun: .*indices"):
            run.times(4, 0.0, 1)
