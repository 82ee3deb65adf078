"""``row_shards``: the converted network run as row shards side by side for large batches, only where a probe
shows its rows independent; real torch exports, translated, traced with a dynamic batch."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest
import tensorflow as tf
import torch
from torch import nn

from torchtfx.components.converter.row_shards import (
    SHARD_MIN_ROWS,
    RowShardedNetwork,
    probe_inputs,
    shard_rows,
)
from torchtfx.components.converter.translator import OnnxGraphModule
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.factory import build_model
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import export_onnx
from torchtfx.data.config.model import ModelConfig

SPEC = ModelSpec(("a", "b", "c"), ("x", "y"), (11, 40))


def _split(n: int = 300) -> ArraySplit:
    rng = np.random.default_rng(0)
    categorical = np.stack([rng.integers(0, c, n) for c in SPEC.cardinalities], axis=1).astype(np.int64)
    return ArraySplit(rng.normal(size=(n, 3)).astype(np.float32), categorical, np.zeros(n, np.float32))


def _export(tmp_path, model: nn.Module) -> onnx.ModelProto:
    export_onnx(ExportHead(model, "binary").eval(), _split(), tmp_path / "m.onnx")
    return onnx.load(str(tmp_path / "m.onnx"))


def _traced(network):
    specs = [tf.TensorSpec([None, 3], tf.float32), tf.TensorSpec([None, 2], tf.int64)]
    return tf.function(lambda d, c: network(d, c)[0], autograph=False).get_concrete_function(*specs)


class _BatchCentered(nn.Module):
    """Subtracts the batch's mean: every row depends on the others."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 1)

    def forward(self, dense, categorical):
        return self.linear(dense - dense.mean(dim=0, keepdim=True)).squeeze(1) + 0 * categorical[:, 0]


@pytest.mark.parametrize("factory", ["mlp", "dcn"])
def test_a_row_independent_network_is_sharded_and_gives_the_whole_networks_outputs(tmp_path, factory):
    torch.manual_seed(0)
    model = _export(tmp_path, build_model(ModelConfig(factory=factory), SPEC))
    whole = OnnxGraphModule(model)
    sharded = shard_rows(whole, model)
    assert isinstance(sharded, RowShardedNetwork)
    want, got = _traced(whole), _traced(sharded)
    rng = np.random.default_rng(1)
    for batch in (1, SHARD_MIN_ROWS - 1, SHARD_MIN_ROWS, SHARD_MIN_ROWS + 1, 1001):
        dense = rng.normal(size=(batch, 3)).astype(np.float32)
        categorical = np.stack([rng.integers(0, c, batch) for c in SPEC.cardinalities], axis=1).astype(np.int64)
        np.testing.assert_allclose(got(dense, categorical).numpy(), want(dense, categorical).numpy(), atol=1e-6)
        assert got(dense, categorical).shape == (batch,)


def test_a_network_whose_rows_depend_on_each_other_runs_whole(tmp_path, caplog):
    torch.manual_seed(0)
    model = _export(tmp_path, _BatchCentered())
    network = OnnxGraphModule(model)
    with caplog.at_level(logging.INFO):
        assert shard_rows(network, model) is network
    assert "its rows depend on each other" in caplog.text


def test_a_network_without_one_output_row_per_input_row_runs_whole(tmp_path, caplog):
    torch.manual_seed(0)
    model = _export(tmp_path, build_model(ModelConfig(factory="mlp"), SPEC))
    network = OnnxGraphModule(model)

    def pooled(dense, categorical):
        return [tf.reduce_sum(network(dense, categorical)[0], keepdims=True)]

    with caplog.at_level(logging.INFO):
        assert shard_rows(pooled, model) is pooled
    assert "not one row per input row" in caplog.text


def test_probe_inputs_cover_fixed_width_float_and_integer_inputs_only(tmp_path):
    torch.manual_seed(0)
    model = _export(tmp_path, build_model(ModelConfig(factory="mlp"), SPEC))
    dense, categorical = probe_inputs(model, rows=8)
    assert dense.shape == (8, 3) and dense.dtype == np.float32 and dense.std() > 0
    assert categorical.shape == (8, 2) and not categorical.any()  # id 0 is in every table
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "width"
    assert probe_inputs(model) is None


def test_row_sharding_needs_two_shards_and_enough_rows():
    with pytest.raises(ValueError, match="shards >= 2"):
        RowShardedNetwork(lambda *x: list(x), shards=1)
