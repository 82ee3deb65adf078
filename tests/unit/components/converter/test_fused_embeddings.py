"""The translator's fusion of per-feature embedding lookups (``fuse_embedding_lookups``) on real torch exports
of the zoo models: the same outputs as the graph translated node by node, fewer TF ops, and ONNX ``Gather``'s
id semantics (negative ids from the end, ids outside the table refused)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tensorflow as tf
import torch

from tests.helpers import FLOAT32_RERUN_TOLERANCE
from torchtfx.components.converter import translator
from torchtfx.components.converter.ops import FUSED_DOMAIN
from torchtfx.components.converter.translator import OnnxGraphModule, fuse_embedding_lookups
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.factory import build_model
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import export_onnx
from torchtfx.data.config.model import ModelConfig

SPEC = ModelSpec(("a", "b", "c"), ("x", "y", "z"), (11, 40, 5))


def _split(n: int = 300) -> ArraySplit:
    rng = np.random.default_rng(0)
    categorical = np.stack([rng.integers(0, c, n) for c in SPEC.cardinalities], axis=1).astype(np.int64)
    return ArraySplit(rng.normal(size=(n, 3)).astype(np.float32), categorical, np.zeros(n, np.float32))


def _exported(tmp_path, factory: str) -> onnx.ModelProto:
    torch.manual_seed(0)
    head = ExportHead(build_model(ModelConfig(factory=factory), SPEC), "binary").eval()
    export_onnx(head, _split(), tmp_path / "m.onnx")
    return onnx.load(str(tmp_path / "m.onnx"))


def _traced(network: OnnxGraphModule):
    specs = [tf.TensorSpec([None, 3], tf.float32), tf.TensorSpec([None, 3], tf.int64)]
    return tf.function(lambda d, c: network(d, c)[0], autograph=False).get_concrete_function(*specs)


def _assert_same_outputs(fused: tf.Tensor, unfused: tf.Tensor) -> None:
    """The same lookups feed the same layers, but as two graphs (see FLOAT32_RERUN_TOLERANCE); a wrong
    table row moves an output by far more."""
    np.testing.assert_allclose(fused.numpy(), unfused.numpy(), rtol=0, atol=FLOAT32_RERUN_TOLERANCE)


def _kernels(fn) -> int:
    """Ops of the traced graph that compute something (not constants, arguments or plumbing)."""
    plumbing = {"Const", "Placeholder", "Identity", "NoOp", "ReadVariableOp"}
    return sum(op.type not in plumbing for op in fn.graph.get_operations())


@pytest.mark.parametrize("factory", ["mlp", "resnet", "dcn"])
def test_fused_lookups_give_the_unfused_outputs_with_fewer_ops(tmp_path, factory):
    model = _exported(tmp_path, factory)
    fused_model, fused = fuse_embedding_lookups(model)
    assert fused == len(SPEC.cardinalities)
    assert [n.op_type for n in fused_model.graph.node].count("Gather") == 0  # both gathers of each lookup
    assert sum(n.domain == FUSED_DOMAIN for n in fused_model.graph.node) == 1
    unfused, fused_fn = _traced(OnnxGraphModule(model, fuse=False)), _traced(OnnxGraphModule(model))
    split = _split()
    for batch in (1, 7, len(split.dense)):
        dense, categorical = split.dense[:batch], split.categorical[:batch]
        _assert_same_outputs(fused_fn(dense, categorical), unfused(dense, categorical))
    ops = {name: _kernels(fn) for name, fn in (("unfused", unfused), ("fused", fused_fn))}
    print(f"{factory}: TF ops that run a kernel {ops}")
    # Per lookup, the column gather, 4 ops that wrap negative ids and the table gather become one table
    # gather; 7 ops (range check, wrap, split) serve all lookups together.
    assert ops["fused"] <= ops["unfused"] - 5 * len(SPEC.cardinalities) + 7


def test_an_ft_transformer_export_has_no_per_feature_lookups_to_fuse(tmp_path):
    model = _exported(tmp_path, "ft_transformer")  # one table with offsets already: nothing to do
    assert fuse_embedding_lookups(model) == (model, 0)


def test_fused_lookups_keep_onnx_gather_id_semantics(tmp_path):
    model = _exported(tmp_path, "mlp")
    fused, unfused = _traced(OnnxGraphModule(model)), _traced(OnnxGraphModule(model, fuse=False))
    dense = np.zeros([2, 3], np.float32)
    negative = np.array([[-1, -40, -5], [-11, 0, 4]], np.int64)  # count from each table's end
    _assert_same_outputs(fused(dense, negative), unfused(dense, negative))
    for outside in ([[11, 0, 0]], [[0, 0, -6]]):  # past table a's 11 rows; before table c's first row
        with pytest.raises(tf.errors.InvalidArgumentError):
            fused(dense[:1], np.array(outside, np.int64))


@pytest.mark.parametrize("max_bytes", [16 * 2**20, 0])
def test_small_tables_are_stored_twice_over_and_large_ones_wrap_by_select(tmp_path, monkeypatch, max_bytes):
    """Both ways of wrapping negative ids (a ``[table; table]`` copy read at ``id + rows``, or a select for a
    table above the size limit) keep ONNX's id semantics, and no table is stored more than the way it reads."""
    monkeypatch.setattr(translator, "_WRAPPED_TABLE_MAX_BYTES", max_bytes)
    model = _exported(tmp_path, "mlp")
    fused_model, _ = fuse_embedding_lookups(model)
    names = {t.name for t in fused_model.graph.initializer}
    tables = [f"model.embeddings.{k}.weight" for k in range(len(SPEC.cardinalities))]
    if max_bytes:
        assert {f"{t}/wrapped" for t in tables} <= names and not names & set(tables)
    else:
        assert set(tables) <= names and not any(n.endswith("/wrapped") for n in names)
    fused, unfused = _traced(OnnxGraphModule(model)), _traced(OnnxGraphModule(model, fuse=False))
    dense = np.zeros([3, 3], np.float32)
    ids = np.array([[-1, -40, -5], [-11, 0, 4], [10, 39, -3]], np.int64)
    _assert_same_outputs(fused(dense, ids), unfused(dense, ids))
    for outside in ([[-12, 0, 0]], [[0, 40, 0]], [[0, 0, 5]]):
        with pytest.raises(tf.errors.InvalidArgumentError):
            fused(dense[:1], np.array(outside, np.int64))
