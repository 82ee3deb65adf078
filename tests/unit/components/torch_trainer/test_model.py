"""The PyTorch model and the shard reader: shapes, embedding sizes, per-epoch shuffling."""

from __future__ import annotations

import numpy as np
import torch

from torchtfx.components.torch_trainer.handoff.shards import ArraySplit, ShardBatches
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.modeling.spec import embedding_dims
from torchtfx.components.torch_trainer.modeling.zoo import mlp
from torchtfx.components.torch_trainer.worker.metrics import roc_auc

LAYOUT = FeatureLayout(dense=("a_xf", "b_xf"), embedded=("c_xf", "d_xf"), cardinalities=(5, 300), label="y_xf")


def _split(n: int) -> ArraySplit:
    rng = np.random.default_rng(0)
    return ArraySplit(
        dense=rng.normal(size=(n, 2)).astype(np.float32),
        categorical=np.stack([rng.integers(0, 5, n), rng.integers(0, 300, n)], axis=1).astype(np.int64),
        label=rng.integers(0, 2, n).astype(np.float32),
    )


def test_model_maps_a_batch_to_one_logit_per_row():
    model = mlp.build(LAYOUT.model_spec(), hidden_units=(16, 8), dropout=0.0, max_embedding_dim=8)
    split = _split(7)
    logits = model(torch.from_numpy(split.dense), torch.from_numpy(split.categorical))
    assert logits.shape == (7,)
    probs = ExportHead(model, "binary")(torch.from_numpy(split.dense), torch.from_numpy(split.categorical))
    assert torch.all((probs > 0) & (probs < 1))


def test_embedding_sizes_grow_with_cardinality_and_are_capped():
    dims = embedding_dims(LAYOUT.cardinalities, max_dim=8)
    assert dims[0] < dims[1] == 8


def test_out_of_vocabulary_ids_fail_loudly():
    model = mlp.build(LAYOUT.model_spec(), hidden_units=(4,), dropout=0.0, max_embedding_dim=4)
    bad = torch.tensor([[0, 300]])
    try:
        model(torch.zeros(1, 2), bad)
    except IndexError:
        return
    raise AssertionError("an id beyond the embedding table must not be silently accepted")


def test_shards_are_disjoint_and_equal_for_training():
    split = _split(101)
    shards = [split.shard(rank, 2, equal=True) for rank in range(2)]
    assert len(shards[0]) == len(shards[1]) == 50
    assert not np.shares_memory(shards[0].dense, shards[1].dense)
    np.testing.assert_array_equal(shards[1].dense, split.dense[50:100])
    eval_shards = [split.shard(rank, 2, equal=False) for rank in range(2)]
    assert sum(len(s) for s in eval_shards) == 101


def test_batches_reshuffle_per_epoch_and_reproducibly():
    batches = ShardBatches(_split(64), batch_size=16, shuffle=True, seed=3)
    first = lambda: next(iter(batches))[1].clone()  # noqa: E731
    batches.set_epoch(0)
    a = next(iter(batches))[0][0].clone()
    batches.set_epoch(1)
    b = next(iter(batches))[0][0].clone()
    batches.set_epoch(0)
    assert torch.equal(a, next(iter(batches))[0][0]) and not torch.equal(a, b)
    assert len(batches) == 4 and first().shape == (16,)


def test_training_batches_never_end_in_a_single_row():
    """BatchNorm raises on a one-row training batch; the shuffle moves another row there each epoch."""
    batches = ShardBatches(_split(33), batch_size=16, shuffle=True, seed=0)
    assert [len(label) for _, label in batches] == [16, 16] and len(batches) == 2
    assert [len(label) for _, label in ShardBatches(_split(33), batch_size=16, shuffle=False, seed=0)] == [16, 16, 1]


def test_auc_matches_definition():
    labels = np.array([0, 0, 1, 1, 1])
    scores = np.array([0.1, 0.6, 0.6, 0.8, 0.9])
    # pairs (pos > neg): 0.6 vs 0.1 ->1, 0.6 vs 0.6 -> 0.5, 0.8 & 0.9 beat both -> 4; total 5.5 / 6
    assert roc_auc(labels, scores) == np.float64(5.5 / 6)
    assert np.isnan(roc_auc(np.zeros(3), np.ones(3)))
