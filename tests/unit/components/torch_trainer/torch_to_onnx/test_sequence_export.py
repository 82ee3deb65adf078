"""Export of token-sequence models: both axes (batch, length) dynamic, verified in onnxruntime at pairs other
than the trace's, a length baked by the model's Python code repaired or named, and the served padding trim."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tensorflow as tf
import torch
from torch import nn

from torchtfx.components.converter.repairs import LENGTH_CONSTANTS
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit, ShardBatches, trim_padding
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.savedmodel.convert import trim_padding as tf_trim_padding
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import ExportError, check_onnx, export_onnx
from torchtfx.components.torch_trainer.torch_to_onnx.shape_checks import TRACE_LENGTH, shape_failures, verify_shapes

MAX_LENGTH, VOCAB = 24, 50


def _split(rows: int = 64, seed: int = 0) -> ArraySplit:
    """Rows of 0 to MAX_LENGTH tokens (some empty), padded at the end, beside two dense and one categorical."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, MAX_LENGTH + 1, rows)
    lengths[:3] = (0, 1, MAX_LENGTH)
    ids = rng.integers(1, VOCAB, (rows, MAX_LENGTH))
    ids[np.arange(MAX_LENGTH)[None, :] >= lengths[:, None]] = 0
    dense = rng.normal(size=(rows, 2)).astype(np.float32)
    categorical = rng.integers(0, 3, (rows, 1))
    return ArraySplit(dense, categorical, rng.integers(0, 2, rows).astype(np.float32), (ids,), ("text_xf",))


class MaskedMean(nn.Module):
    """Token embeddings averaged over the real tokens (an empty text averages nothing: zeros)."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, 8, padding_idx=0)
        self.out = nn.Linear(8 + 2, 1)

    def pooled(self, ids: torch.Tensor) -> torch.Tensor:
        mask = (ids != 0).unsqueeze(-1).float()
        return (self.tokens(ids) * mask).sum(1) / mask.sum(1).clamp(min=1)

    def forward(self, dense, categorical, ids):
        return self.out(torch.cat([self.pooled(ids), dense], dim=1)).squeeze(-1)


class ReadsLength(MaskedMean):
    """Research code that takes the length as a Python int: the trace bakes it into a Reshape."""

    def pooled(self, ids: torch.Tensor) -> torch.Tensor:
        length = int(ids.shape[1])
        flat = self.tokens(ids).reshape(-1, length * 8).reshape(ids.shape[0], length, 8)
        mask = (ids != 0).unsqueeze(-1).float()
        return (flat * mask).sum(1) / mask.sum(1).clamp(min=1)


class ClsTransformer(MaskedMean):
    """torch's own nn.TransformerEncoder with a [CLS] token in front: the legacy exporter keeps length + 1 as a
    constant in the attention's reshape (measured: "/encoder/layers.0/self_attn/Reshape_4" refuses length 1)."""

    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.cls = nn.Parameter(torch.randn(1, 1, 8))

    def pooled(self, ids: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.cls.expand(ids.shape[0], 1, 8), self.tokens(ids)], dim=1)
        keep = torch.cat([torch.ones_like(ids[:, :1]), ids], dim=1) != 0
        return self.encoder(x, src_key_padding_mask=~keep)[:, 0]


class LengthSquaredBias(MaskedMean):
    """An attention bias [length, length] built in Python: the trace keeps an 11 x 11 constant, which no
    repair of single sizes can follow."""

    def pooled(self, ids: torch.Tensor) -> torch.Tensor:
        length = int(ids.shape[1])
        tokens = self.tokens(ids)
        scores = tokens @ tokens.transpose(1, 2) + torch.zeros(length, length)
        return super().pooled(ids) + (scores.softmax(-1) @ tokens).mean(1)


def test_export_is_verified_at_batch_and_length_pairs_including_1_and_max_length(tmp_path):
    split = _split()
    head = ExportHead(MaskedMean(), "binary").eval()
    report = export_onnx(head, split, tmp_path / "m.onnx")
    assert report.repairs == ()
    lengths = {length for _, length in report.verified_shapes}
    assert {1, MAX_LENGTH} <= lengths and TRACE_LENGTH not in lengths
    assert {batch for batch, _ in report.verified_shapes} == {1, 7}
    graph = onnx.load(str(tmp_path / "m.onnx"))
    dims = [d.dim_param for d in graph.graph.input[2].type.tensor_type.shape.dim]
    assert [i.name for i in graph.graph.input] == ["dense", "categorical", "text_xf"] and all(dims)
    assert check_onnx(head, tmp_path / "m.onnx", split) < 1e-5


def test_a_length_read_as_a_python_int_is_repaired(tmp_path):
    split = _split()
    head = ExportHead(ReadsLength(), "binary").eval()
    report = export_onnx(head, split, tmp_path / "m.onnx")
    assert LENGTH_CONSTANTS in report.repairs
    assert not shape_failures(onnx.load(str(tmp_path / "m.onnx")), head, split)


def test_a_length_plus_one_baked_by_torch_attention_behind_a_cls_token_is_repaired(tmp_path):
    split = _split()
    head = ExportHead(ClsTransformer(), "binary").eval()
    report = export_onnx(head, split, tmp_path / "m.onnx")
    assert LENGTH_CONSTANTS in report.repairs
    assert check_onnx(head, tmp_path / "m.onnx", split) < 1e-5


def test_a_length_the_repair_cannot_follow_is_named(tmp_path):
    with pytest.raises(ExportError, match=r"sequence length 11.*int\(ids.shape\[1\]\)") as caught:
        export_onnx(ExportHead(LengthSquaredBias(), "binary").eval(), _split(), tmp_path / "m.onnx")
    assert "(1, 1)" in str(caught.value) and "Add node" in str(caught.value)
    assert not (tmp_path / "m.onnx").exists()


def test_verify_shapes_cover_length_1_and_max_length_and_skip_the_trace_length():
    shapes = verify_shapes(_split())
    assert (1, 1) in shapes and (7, MAX_LENGTH) in shapes
    assert all(length != TRACE_LENGTH for _, length in shapes)


def test_batches_are_cut_to_their_longest_row_in_training_and_serving_alike():
    ids = np.array([[5, 6, 0, 0, 0], [7, 0, 0, 0, 0]], np.int64)
    assert trim_padding(ids).tolist() == [[5, 6], [7, 0]]
    assert tf_trim_padding(tf.constant(ids)).numpy().tolist() == [[5, 6], [7, 0]]
    empty = np.zeros((2, 5), np.int64)  # a batch of empty texts keeps one padding column
    assert trim_padding(empty).shape == (2, 1) and tuple(tf_trim_padding(tf.constant(empty)).shape) == (2, 1)
    split = _split()
    for (dense, _, tokens), label in ShardBatches(split, 8, shuffle=True, seed=1):
        assert tokens.shape[1] == max(1, int((tokens != 0).sum(1).max())) and len(label) == len(dense)


def test_split_round_trips_its_token_ids_and_names(tmp_path):
    split = _split()
    split.save(tmp_path / "eval")
    loaded = ArraySplit.load(tmp_path / "eval")
    assert loaded.sequence_names == ("text_xf",)
    np.testing.assert_array_equal(loaded.sequences[0], split.sequences[0])
    shard = loaded.shard(1, 2, equal=False)
    assert shard.sequence_names == ("text_xf",) and len(shard.sequences[0]) == len(shard)
