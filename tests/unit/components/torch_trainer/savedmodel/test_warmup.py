"""TF Serving warmup requests: written into a real serving SavedModel from raw eval examples, read back in
TF Serving's format, and replayed through the signature they name."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import torch
from tensorflow.core.framework import types_pb2

from tests.helpers import FLOAT32_RERUN_TOLERANCE
from tests.unit.components.torch_trainer.served_models import export_and_serve, train_briefly
from torchtfx.components.torch_trainer.modeling.factory import build_model
from torchtfx.components.torch_trainer.savedmodel.warmup import (
    WARMUP_BATCH_SIZES,
    read_warmup_requests,
    replay_warmup,
    serving_input_name,
    warmup_path,
    write_warmup_requests,
)
from torchtfx.data.config.model import ModelConfig


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_taxi):
    """The default model, trained briefly, as the Trainer's serving SavedModel, with warmup written into it."""
    torch.manual_seed(0)
    model = train_briefly(build_model(ModelConfig(), tiny_taxi.layout.model_spec()), tiny_taxi)
    root = tmp_path_factory.mktemp("warmup")
    serving = export_and_serve(tiny_taxi, model, root / "model.onnx", root / "serving")
    written = write_warmup_requests(serving, str(tiny_taxi.examples_dir), (tiny_taxi.cfg.label.column,))
    return serving, written


def _client_requests(tiny, count: int) -> list[bytes]:
    """The first ``count`` raw eval examples without the label, read here independently of warmup.py."""
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(tiny.examples_path), compression_type="GZIP")]
    stripped = []
    for record in records[:count]:
        example = tf.train.Example.FromString(record)
        del example.features.feature[tiny.cfg.label.column]
        stripped.append(example.SerializeToString())
    return stripped


def test_warmup_file_holds_predict_requests_of_raw_examples_in_tf_serving_format(served, tiny_taxi):
    serving, written = served
    path = warmup_path(serving)
    assert path == serving / "assets.extra" / "tf_serving_warmup_requests"
    # TF Serving reads it as an uncompressed TFRecord file: not gzip, and readable without a compression type.
    assert path.read_bytes()[:2] != b"\x1f\x8b"
    assert len(list(tf.data.TFRecordDataset(str(path), compression_type=""))) == len(WARMUP_BATCH_SIZES)
    logs = read_warmup_requests(serving)
    assert written == len(logs) == len(WARMUP_BATCH_SIZES) == 3
    expected = _client_requests(tiny_taxi, max(WARMUP_BATCH_SIZES))
    for log, size in zip(logs, WARMUP_BATCH_SIZES, strict=True):
        assert log.WhichOneof("log_type") == "predict_log"
        request = log.predict_log.request
        assert request.model_spec.signature_name == "serving_default"
        assert list(request.inputs) == ["examples"]
        tensor = request.inputs["examples"]
        assert tensor.dtype == types_pb2.DT_STRING
        assert [d.size for d in tensor.tensor_shape.dim] == [size]
        # Compared parsed: a feature map's serialized order is not fixed. The expected ones carry no label.
        parsed = [tf.train.Example.FromString(s) for s in tensor.string_val]
        assert parsed == [tf.train.Example.FromString(s) for s in expected[:size]]


def test_every_warmup_request_replays_to_the_signatures_own_outputs(served, tiny_taxi):
    serving, _ = served
    loaded = tf.saved_model.load(str(serving))
    serve = loaded.signatures["serving_default"]
    replayed = replay_warmup(serving, loaded)
    assert [r.signature for r in replayed] == ["serving_default"] * 3
    requests = _client_requests(tiny_taxi, max(WARMUP_BATCH_SIZES))
    for reply, size in zip(replayed, WARMUP_BATCH_SIZES, strict=True):
        direct = serve(examples=tf.constant(requests[:size]))
        assert sorted(reply.outputs) == sorted(direct) == ["probabilities"]
        assert reply.outputs["probabilities"].shape == (size,)
        # the same signature, run twice (see FLOAT32_RERUN_TOLERANCE)
        got, want = reply.outputs["probabilities"], direct["probabilities"].numpy()
        np.testing.assert_allclose(got, want, rtol=0, atol=FLOAT32_RERUN_TOLERANCE)


def _split_of(tiny, rows: int, out_dir) -> str:
    """A raw split of ``rows`` of the tiny eval examples, gzipped as ExampleGen writes it."""
    out_dir.mkdir()
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(tiny.examples_path), compression_type="GZIP")]
    with tf.io.TFRecordWriter(str(out_dir / "part-0.gz"), options="GZIP") as writer:
        for record in records[:rows]:
            writer.write(record)
    return str(out_dir)


class _Renamed(tf.Module):
    """A serving signature whose string input is called ``records``: the count of examples per request."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="records")])
    def serve(self, records):
        return {"rows": tf.shape(records)[0]}


def test_the_input_name_comes_from_the_saved_model_and_a_small_split_gives_smaller_batches(tiny_taxi, tmp_path):
    module = _Renamed()
    tf.saved_model.save(module, str(tmp_path / "model"), signatures={"serving_default": module.serve})
    assert serving_input_name(tmp_path / "model") == "records"
    with pytest.raises(FileNotFoundError, match=r"no \*\.gz TFRecord files"):
        write_warmup_requests(tmp_path / "model", str(tmp_path / "no-split"))
    split = _split_of(tiny_taxi, 5, tmp_path / "Split-eval")
    assert write_warmup_requests(tmp_path / "model", split) == 2  # 32 and 8 both become 5
    replayed = replay_warmup(tmp_path / "model")
    assert [list(r.inputs) for r in replayed] == [["records"], ["records"]]
    assert [int(r.outputs["rows"]) for r in replayed] == [5, 1]


class _TwoInputs(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.float32)])
    def serve(self, examples, weights):
        return {"n": tf.shape(examples)[0] + tf.shape(weights)[0]}


def test_a_signature_without_one_string_input_is_refused(tiny_taxi, tmp_path):
    module = _TwoInputs()
    tf.saved_model.save(module, str(tmp_path / "model"), signatures={"serving_default": module.serve})
    with pytest.raises(ValueError, match=r"takes \['examples', 'weights'\]"):
        write_warmup_requests(tmp_path / "model", str(tiny_taxi.examples_dir))
    with pytest.raises(ValueError, match="no 'predict' signature"):
        serving_input_name(tmp_path / "model", "predict")
    assert not warmup_path(tmp_path / "model").exists()
    with pytest.raises(FileNotFoundError, match="no warmup requests"):
        read_warmup_requests(tmp_path / "model")
