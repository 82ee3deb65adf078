"""The export check feeds rows padded to several lengths: a graph whose padding mask was fixed by the trace (a
Python branch on the ids' values) is traced live where it can be, and refused by name where it cannot."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from torch import nn

from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import ExportError, check_onnx, export_onnx
from torchtfx.components.torch_trainer.torch_to_onnx.shape_checks import (
    MaskFailure,
    input_names,
    sample_inputs,
    shape_failures,
)

MAX_LENGTH, VOCAB = 24, 50


def _split(rows: int = 40, padded: bool = False, seed: int = 0) -> ArraySplit:
    """Every text at least ``MAX_LENGTH`` tokens (cut there: no padding), as long reviews are; ``padded``:
    each row cut at its own length instead."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, VOCAB, (rows, MAX_LENGTH))
    if padded:
        ids[np.arange(MAX_LENGTH)[None, :] >= rng.integers(1, MAX_LENGTH + 1, rows)[:, None]] = 0
    dense = rng.normal(size=(rows, 2)).astype(np.float32)
    categorical = rng.integers(0, 3, (rows, 1))
    return ArraySplit(dense, categorical, rng.integers(0, 2, rows).astype(np.float32), (ids,), ("text_xf",))


class SkipsMaskWhenFull(nn.Module):
    """Research code's fast path, as transformers' SDPA mask takes it outside a trace: no padding, no mask."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, 8, padding_idx=0)
        self.out = nn.Linear(8 + 2, 1)

    def full(self, ids: torch.Tensor) -> bool:
        return bool((ids != 0).all())

    def forward(self, dense, categorical, ids):
        if self.full(ids):
            pooled = self.tokens(ids).mean(1)
        else:
            mask = (ids != 0).unsqueeze(-1).float()
            pooled = (self.tokens(ids) * mask).sum(1) / mask.sum(1).clamp(min=1)
        return self.out(torch.cat([pooled, dense], dim=1)).squeeze(-1) + 0.1 * categorical[:, 0]


class SkipsMaskInLargeBatches(SkipsMaskWhenFull):
    """A branch no trace input can keep live: no mask above 8 rows (the trace has 17)."""

    def full(self, ids: torch.Tensor) -> bool:
        return ids.shape[0] > 8


def _legacy_graph(head: nn.Module, split: ArraySplit) -> onnx.ModelProto:
    """The plain legacy export of ``head`` traced on the split's first 17 rows as they are (no padding)."""
    sample = tuple(torch.from_numpy(x) for x in split.model_inputs(slice(0, 17)))
    names = list(input_names(split))
    axes = {name: {0: "batch"} for name in names} | {"text_xf": {0: "batch", 1: "length"}}
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        path = Path(tmp) / "m.onnx"
        torch.onnx.export(head, sample, str(path), input_names=names, dynamic_axes=axes, opset_version=17, dynamo=False)
        return onnx.load(str(path))


def test_verification_rows_are_padded_to_several_lengths_with_a_full_row_first():
    (ids,) = sample_inputs(_split(), 7, MAX_LENGTH)[2:]
    kept = (ids != 0).sum(1).tolist()
    assert kept[0] == MAX_LENGTH and len(set(kept)) == 7 and min(kept) >= 1


def test_a_graph_whose_padding_mask_was_fixed_at_trace_is_refused_by_name():
    head = ExportHead(SkipsMaskWhenFull(), "binary").eval()
    split = _split()
    failures = shape_failures(_legacy_graph(head, split), head, split)
    assert failures and all(isinstance(what, MaskFailure) for what in failures.values())
    assert "rows padded" in next(iter(failures.values()))


def test_a_mask_skipped_on_full_rows_is_traced_live(tmp_path):
    head = ExportHead(SkipsMaskWhenFull(), "binary").eval()
    export_onnx(head, _split(), tmp_path / "m.onnx")
    assert check_onnx(head, tmp_path / "m.onnx", _split(padded=True)) < 1e-5


def test_a_mask_no_trace_can_keep_live_is_refused_naming_the_cause(tmp_path):
    head = ExportHead(SkipsMaskInLargeBatches(), "binary").eval()
    with pytest.raises(ExportError, match=r"padding mask.*fixed at the trace.*ids != 0") as caught:
        export_onnx(head, _split(), tmp_path / "m.onnx")
    assert "\n" not in str(caught.value) and not (tmp_path / "m.onnx").exists()
