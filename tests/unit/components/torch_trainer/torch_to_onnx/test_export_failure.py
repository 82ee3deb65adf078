"""A failed export explained: where the model fails in PyTorch itself at a verification batch size, the error is
torch's own with the user's line, not advice about a batch size baked into the graph."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from torch import nn

from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.torch_to_onnx.export_failure import fails_in_torch
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import ExportError, export_onnx
from torchtfx.components.torch_trainer.torch_to_onnx.shape_checks import TorchFailure


class SqueezedThenIndexed(nn.Module):
    """Runs at the trace batch (17) and at 7; at one row squeeze() drops the batch axis and the index fails."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 2)

    def forward(self, dense, categorical):
        h = self.linear(dense).unsqueeze(1).squeeze()
        return h[:, 0] - h[:, 1]


def _split(rows: int = 40) -> ArraySplit:
    rng = np.random.default_rng(0)
    return ArraySplit(
        dense=rng.normal(size=(rows, 3)).astype(np.float32),
        categorical=np.zeros((rows, 1), np.int64),
        label=np.zeros(rows, np.float32),
    )


def test_an_export_that_fails_because_pytorch_fails_at_one_row_says_so_with_torch_s_error(tmp_path):
    line = inspect.getsourcelines(SqueezedThenIndexed.forward)[1] + 2
    with pytest.raises(ExportError) as err:
        export_onnx(ExportHead(SqueezedThenIndexed(), "binary"), _split(), tmp_path / "model.onnx")
    message = str(err.value)
    assert message.startswith("the model fails in PyTorch itself at batch size 1, before any export: IndexError: ")
    assert f"{__file__}:{line} in forward: `return h[:, 0] - h[:, 1]`" in message
    assert "x.squeeze(-1), not x.squeeze()" in message
    assert "trace batch size" not in message and "reshape with -1" not in message
    assert not (tmp_path / "model.onnx").exists()


def test_only_pytorch_s_own_failures_are_reported_as_such():
    assert fails_in_torch({1: "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Reshape"}) is None
    message = fails_in_torch({(1, 5): TorchFailure("IndexError: boom"), 7: "differs"})
    assert message and message.startswith("the model fails in PyTorch itself at batch size 1 and length 5")
