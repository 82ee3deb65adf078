"""The dynamo fallback's failure (issue #41): the child's real error and the user's source line, not torch's
last stderr line "(Refer to the full stack trace above for more information.)"; and the legacy exporter's IR
graph dump kept out of what a worker writes to train.log."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.factory import build_model
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.components.torch_trainer.torch_to_onnx.dynamo_export import ModelRecipe, child_failure
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import ExportError, export_onnx
from torchtfx.data.config.model import ModelConfig

HERE = Path(__file__)
# A real child's stderr (torch 2.14.1, onnxscript 0.7.2) for DataDepthOneHot below, paths under /repo.
CAPTURED = HERE.with_name("dynamo_child_stderr.txt")


class DataDepthOneHot(nn.Module):
    """A one-hot whose depth comes from the data (num_classes left at -1), beside erfinv (no ONNX form), so the
    legacy exporter fails first and the dynamo exporter stops on the data-dependent depth."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.out = nn.Linear(6, 1)

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        hot = nn.functional.one_hot(categorical[:, 0].clamp(min=0))
        return (self.out(torch.erfinv(torch.tanh(dense) * 0.5)) + hot.float().sum(1, keepdim=True)).squeeze(1)


def data_depth_one_hot(spec: ModelSpec) -> nn.Module:
    return DataDepthOneHot(spec)


SPEC = ModelSpec(("a", "b", "c", "d", "e", "f"), ("x", "y"), (3, 3))
CONFIG = ModelConfig(factory=f"{__name__}:data_depth_one_hot")


def _split(n: int = 64) -> ArraySplit:
    rng = np.random.default_rng(0)
    dense = rng.normal(size=(n, 6)).astype(np.float32)
    return ArraySplit(dense, rng.integers(0, 3, (n, 2)), rng.integers(0, 2, n).astype(np.float32))


def test_the_childs_stderr_gives_the_root_exception_and_the_users_line():
    message = child_failure(CAPTURED.read_text(), 1)
    assert message.startswith("GuardOnDataDependentSymNode: Could not extract specialized integer")
    assert "/repo/tests/unit/components/torch_trainer/export/test_dynamo_export.py:" in message
    assert "in forward: `hot = nn.functional.one_hot(categorical[:, 0].clamp(min=0))`" in message
    assert "num_classes" in message and "Refer to the full stack trace" not in message
    assert len(message.splitlines()) == 1


def test_a_child_without_a_traceback_reports_its_last_line():
    assert child_failure("killed by the OOM killer\n", -9) == "killed by the OOM killer"
    assert child_failure("", 3) == "exit code 3"


def test_a_data_dependent_one_hot_depth_in_the_dynamo_fallback_is_named_with_the_users_line(tmp_path):
    head = ExportHead(build_model(CONFIG, SPEC), "binary").eval()
    with pytest.raises(ExportError) as caught:
        export_onnx(head, _split(), tmp_path / "m.onnx", ModelRecipe(CONFIG, SPEC, "binary"))
    message = str(caught.value)
    assert "aten::erfinv" in message and "dynamo exporter failed too: GuardOnDataDependentSymNode" in message
    assert f"{HERE}:" in message and "`hot = nn.functional.one_hot(categorical[:, 0].clamp(min=0))`" in message
    assert "Refer to the full stack trace" not in message and len(message.splitlines()) == 1
    assert not (tmp_path / "m.onnx").exists()


def test_the_legacy_exporters_ir_graph_dump_reaches_neither_stdout_nor_stderr(tmp_path):
    """A DDP worker's stdout and stderr are teed into train.log; torch writes the dump to C++'s buffered
    std::cout, flushed when the process ends, so a process of its own shows it."""
    script = textwrap.dedent(f"""
        import numpy as np, torch
        from {__name__} import DataDepthOneHot, SPEC, _split
        from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import ExportError, export_onnx
        from torchtfx.components.torch_trainer.modeling.heads import ExportHead
        try:
            export_onnx(ExportHead(DataDepthOneHot(SPEC), "binary").eval(), _split(), __import__("pathlib").Path(
                {str(tmp_path / "m.onnx")!r}))
        except ExportError as err:
            print("refused:", err)
    """)
    with open(tmp_path / "train.log", "w") as log:
        subprocess.run([sys.executable, "-c", script], stdout=log, stderr=subprocess.STDOUT, check=True, timeout=300)
    text = (tmp_path / "train.log").read_text()
    assert "refused: the torch op aten::erfinv" in text
    assert "Torch IR graph" not in text and "graph(%" not in text, text[:2000]
