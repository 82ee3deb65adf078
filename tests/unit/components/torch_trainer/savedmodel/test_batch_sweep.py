"""The batch-size sweep: a served graph whose shapes are computed from the data passes the ONNX batch checks and
the parity gate, and is stopped at the batch sizes it fails at, with TF's node and the fix."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.savedmodel.batch_sweep import (
    BatchSizeError,
    SizeFailure,
    SweepReport,
    enforce_sweep,
    sweep_batch_sizes,
    sweep_sizes,
)
from torchtfx.components.torch_trainer.savedmodel.convert import build_serving_model, convert_onnx
from torchtfx.components.torch_trainer.savedmodel.parity import measure_parity
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import export_onnx

EXPERTS = 4


class CapacityMoE(nn.Module):
    """Top-2 of 4 experts over a row's categorical tokens, as published mixtures of experts write it: the expert
    capacity ``ceil(1.25 * k * tokens / experts)`` and the busiest expert's queue come from the routed tokens,
    and a Python ``if`` on them trims the dispatch buffer. Cash trips (payment id 0) send every token to experts 0
    and 1 (an expert overflows); other rows alternate between {0, 1} and {2, 3} (no expert overflows). The ONNX
    trace keeps the branch its rows took."""

    def __init__(self, spec, d: int = 4, factor: float = 1.25) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(c, d) for c in spec.cardinalities)
        self.router = nn.Linear(d, EXPERTS)
        self.experts = nn.Parameter(torch.randn(EXPERTS, d, d) * 0.5)
        self.out = nn.Linear(d, 1)
        self.factor = factor

    def forward(self, dense, categorical):
        x = torch.stack([e(categorical[:, i]) for i, e in enumerate(self.embeddings)], 1)  # [b, f, d]
        odd = torch.arange(x.shape[1]) % 2 == 1
        first = torch.where((categorical[:, :1] == 0) | ~odd, 0, 2)
        chosen = torch.stack([first, first + 1], -1)  # [b, f, k]
        gates = torch.softmax(self.router(x), -1).gather(-1, chosen)
        assign = F.one_hot(chosen, EXPERTS).float()  # [b, f, k, E]
        position = (torch.cumsum(assign.reshape(-1, EXPERTS), 0).reshape(assign.shape) - 1) * assign - (1 - assign)
        busiest = assign.sum((0, 1, 2)).max().long()
        capacity = torch.ceil(self.factor * assign.sum() / EXPERTS).long()
        dispatch = (position.unsqueeze(-1) == torch.arange(busiest)).float()  # [b, f, k, E, busiest]
        if busiest > capacity:  # an expert overflows: its tokens past the capacity are dropped
            dispatch, slots = dispatch[..., :capacity], capacity
        else:
            slots = busiest
        priority = 1.0 / (1.0 + torch.arange(slots))
        weight = (dispatch * priority).sum(-1) * assign * gates.unsqueeze(-1)
        h = torch.einsum("bfke,bfd,edh->bfh", weight, x, self.experts)
        return self.out(h.mean(1)).squeeze(-1)


@pytest.fixture(scope="module")
def served_moe(tmp_path_factory, tiny_taxi):
    """The MoE through the Trainer's export (on training rows that start with cash trips, as a training split
    may) and conversion; the eval split starts with a card trip."""
    torch.manual_seed(0)
    model = CapacityMoE(tiny_taxi.layout.model_spec()).eval()
    arrays = tiny_taxi.arrays
    train = arrays.rows(np.argsort(arrays.categorical[:, 0] != 0, kind="stable"))
    root = tmp_path_factory.mktemp("sweep")
    export_onnx(ExportHead.for_layout(model, tiny_taxi.layout), train, root / "model.onnx")
    network = convert_onnx(root / "model.onnx", root / "onnx2tf").network
    build_serving_model(network, tiny_taxi.tft_output, tiny_taxi.cfg, tiny_taxi.layout, root / "serving")
    return model, str(root / "serving")


def test_a_graph_with_data_computed_shapes_passes_parity_and_is_stopped_at_the_sizes_it_fails(served_moe, tiny_taxi):
    model, serving = served_moe
    eval_uri = str(tiny_taxi.examples_dir)
    assert measure_parity(serving, eval_uri, model, tiny_taxi.layout, 1e-5).passed  # the gate before this one

    report = sweep_batch_sizes(serving, eval_uri, model, tiny_taxi.layout, 1e-5, serving_batch=600)

    assert report.sizes == (1, 2, 3, 7, 31, 600)
    assert report.failed_sizes == (1, 2)
    first = report.failures[0]
    assert first.node and first.node.startswith("Mul") and "Incompatible shapes" in first.cause
    with pytest.raises(BatchSizeError) as raised:
        enforce_sweep(report)
    message = str(raised.value)
    assert "batch sizes 1, 2 of real eval rows (passing at 3, 7, 31, 600)" in message
    assert f"node {first.node} raised InvalidArgumentError: Incompatible shapes" in message
    assert "a shape computed from the data" in message and "not handed to the Evaluator" in message
    assert "Fix: compute such sizes with tensor ops" in message
    assert "\n" not in message


def test_the_serving_batch_joins_the_uneven_sizes():
    assert sweep_sizes(1024) == (1, 2, 3, 7, 31, 1024)
    assert sweep_sizes(7) == (1, 2, 3, 7, 31)


def test_a_size_where_pytorch_itself_fails_is_reported_as_the_models_own_failure():
    report = SweepReport((1, 7), (SizeFailure(1, "PyTorch itself raised IndexError: boom", torch_failed=True),))
    with pytest.raises(BatchSizeError, match=r"batch size 1 of real eval rows \(passing at 7\).*PyTorch itself"):
        enforce_sweep(report)
    enforce_sweep(SweepReport((1, 7)))  # nothing failed: no error
