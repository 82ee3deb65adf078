"""``torchtfx convert``: any ONNX file to a SavedModel whose signature takes the graph's inputs by name, with
dynamic dimensions kept dynamic, and its parity against onnxruntime reported."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tensorflow as tf
import torch
from click.testing import CliRunner
from onnx import TensorProto, helper
from torch import nn

from tests.unit.components.converter.bad_models import UNCONVERTIBLE, external_model, unconvertible
from torchtfx.components.converter.savedmodel import SIGNATURE, convert
from torchtfx.components.converter.translator import ConversionError
from torchtfx.pipeline.cli.convert import convert_cmd


class TokenClassifier(nn.Module):
    """Token ids [batch, seq] -> embeddings -> 1-D convolution -> max over the sequence -> logits."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(2, 8)
        self.conv = nn.Conv1d(8, 8, 3, padding=1)
        self.out = nn.Linear(8, 3)

    def forward(self, ids: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
        x = self.conv(self.embed(ids).transpose(1, 2)).amax(2)
        return torch.softmax(self.out(x) + dense.sum(1, keepdim=True), -1)


def _export(path) -> None:
    args = (torch.zeros(2, 5, dtype=torch.long), torch.zeros(2, 4))
    axes = {"ids": {0: "batch", 1: "seq"}, "dense": {0: "batch"}, "probs": {0: "batch"}}
    torch.onnx.export(
        TokenClassifier().eval(),
        args,
        str(path),
        input_names=["ids", "dense"],
        output_names=["probs"],
        dynamic_axes=axes,
        opset_version=17,
        dynamo=False,
    )


def test_a_torch_export_converts_with_batch_and_sequence_dynamic(tmp_path):
    _export(tmp_path / "m.onnx")
    report = convert(tmp_path / "m.onnx", tmp_path / "saved")
    assert [p.name for p in report.parity] == ["probs"] and report.max_rel_diff < 1e-5
    serve = tf.saved_model.load(str(tmp_path / "saved")).signatures[SIGNATURE]
    assert serve.structured_input_signature[1]["ids"].shape.as_list() == [None, None]
    out = serve(ids=tf.zeros([7, 11], tf.int64), dense=tf.zeros([7, 4]))["probs"]
    assert out.shape == (7, 3)


def test_the_command_prints_the_parity_and_exits_zero(tmp_path):
    _export(tmp_path / "m.onnx")
    inputs = {"ids": np.ones((4, 9), np.int64), "dense": np.ones((4, 4), np.float32)}
    np.savez(tmp_path / "in.npz", **inputs)
    result = CliRunner().invoke(
        convert_cmd, [str(tmp_path / "m.onnx"), str(tmp_path / "out"), "--inputs", str(tmp_path / "in.npz")]
    )
    assert result.exit_code == 0, result.output
    assert "parity vs onnxruntime, probs: max |diff|" in result.output


def test_a_model_outside_the_operator_set_exits_2_naming_the_op(tmp_path):
    node = helper.make_node("Frobnicate", ["x"], ["y"], domain="example.custom")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("example.custom", 1)]
    )
    onnx.save(model, tmp_path / "m.onnx")
    result = CliRunner().invoke(convert_cmd, [str(tmp_path / "m.onnx"), str(tmp_path / "out")])
    assert result.exit_code == 2 and "example.custom.Frobnicate" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["missing.onnx"])
def test_a_missing_file_exits_2_naming_it(tmp_path, name):
    result = CliRunner().invoke(convert_cmd, [str(tmp_path / name), str(tmp_path / "out")])
    assert result.exit_code == 2 and f"{tmp_path / name} is not a file" in result.output


@pytest.mark.parametrize("kind", sorted(UNCONVERTIBLE))
def test_a_model_that_does_not_convert_raises_one_line_and_writes_nothing(tmp_path, kind):
    unconvertible(tmp_path / "m.onnx", kind)
    with pytest.raises(ConversionError, match=UNCONVERTIBLE[kind]) as caught:
        convert(tmp_path / "m.onnx", tmp_path / "out")
    assert len(str(caught.value).splitlines()) == 1 and "Fix: " in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]  # no OUT_DIR, no staging folder left


def test_a_second_conversion_replaces_the_savedmodel_and_a_foreign_folder_is_refused(tmp_path):
    unconvertible(tmp_path / "m.onnx", "")  # Relu, converts
    convert(tmp_path / "m.onnx", tmp_path / "out")
    convert(tmp_path / "m.onnx", tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "out"]
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    with pytest.raises(ConversionError, match="exists and is not a SavedModel folder"):
        convert(tmp_path / "m.onnx", tmp_path / "notes")
    assert [p.name for p in (tmp_path / "notes").iterdir()] == ["todo.txt"]


def test_external_data_through_a_symlink_out_of_the_models_folder_is_refused(tmp_path):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.array([1.5, 2.5], np.float32).tobytes())
    external_model(tmp_path / "model", "w.bin")
    (tmp_path / "model" / "w.bin").symlink_to(secret)
    with pytest.raises(ConversionError, match=f"resolves to {secret}, outside the model's folder"):
        convert(tmp_path / "model" / "m.onnx", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    (tmp_path / "model" / "w.bin").unlink()
    (tmp_path / "model" / "w.bin").write_bytes(secret.read_bytes())  # the same data inside the folder converts
    assert convert(tmp_path / "model" / "m.onnx", tmp_path / "out").max_rel_diff < 1e-6
