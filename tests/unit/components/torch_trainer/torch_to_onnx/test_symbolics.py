"""torchtfx's own symbolics (issue #41): ``aten::uniform`` in a published sparse MoE whose eval output ignores
the draw exports with the legacy exporter and converts to TF with parity; one whose eval output is random is
refused by the determinism check before any symbolic runs. (Every entry's semantics: test_exporter_gaps.py.)"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tensorflow as tf
import torch
from torch import nn

from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.savedmodel.convert import convert_onnx
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import ExportError, export_onnx


class SparseMoE(nn.Module):
    """A top-k gate with a "random" second-expert policy, as the published block has it: keep an expert where a
    uniform draw is below gate / threshold. With the eval threshold 0 (eps 1e-9) every expert is kept, so the
    draw is made and its comparison is in the graph, yet the output does not depend on it."""

    def __init__(self, eval_threshold: float = 0.0) -> None:
        super().__init__()
        self.gate, self.experts = nn.Linear(6, 4), nn.Linear(6, 4)
        self.eval_threshold = eval_threshold

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        g = torch.softmax(self.gate(dense), -1)
        probs = torch.zeros_like(g).uniform_(0.0, 1.0)
        keep = probs < g / max(0.2 if self.training else self.eval_threshold, 1e-9)
        return (self.experts(dense) * g * keep).sum(1, keepdim=True) + 0.1 * categorical.float().sum(1, keepdim=True)


def _split(n: int) -> ArraySplit:
    rng = np.random.default_rng(n)
    dense = rng.normal(size=(n, 6)).astype(np.float32)
    return ArraySplit(dense, rng.integers(0, 3, (n, 2)), rng.integers(0, 2, n).astype(np.float32))


def test_a_moe_drawing_uniform_on_an_ignored_branch_exports_and_converts_with_parity(tmp_path):
    torch.manual_seed(0)
    head = ExportHead(SparseMoE(), "binary").eval()
    report = export_onnx(head, _split(64), tmp_path / "m.onnx")
    assert report.exporter == "legacy" and report.symbolics == ("uniform",)
    assert "RandomUniformLike" in {n.op_type for n in onnx.load(str(tmp_path / "m.onnx")).graph.node}
    conversion = convert_onnx(tmp_path / "m.onnx", tmp_path / "work")
    for rows in (1, 7, 64):
        split = _split(rows)
        got = conversion.network(tf.constant(split.dense), tf.constant(split.categorical))[0].numpy()
        with torch.no_grad():
            want = head(torch.from_numpy(split.dense), torch.from_numpy(split.categorical)).numpy()
        np.testing.assert_allclose(got.reshape(want.shape), want, atol=1e-5)


def test_a_moe_whose_eval_output_depends_on_the_draw_is_still_refused(tmp_path):
    head = ExportHead(SparseMoE(eval_threshold=0.2), "binary").eval()
    with pytest.raises(ExportError, match="not deterministic in eval mode"):
        export_onnx(head, _split(64), tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()
