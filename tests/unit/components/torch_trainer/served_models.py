"""What several Trainer tests need: a model trained for a few full-batch steps on a tiny fixture, its FP32
serving SavedModel (ONNX export -> translator -> serving signatures), and a model built to be
precision-sensitive."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from torchtfx.components.torch_trainer.modeling.heads import ExportHead, task_loss
from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.components.torch_trainer.savedmodel.convert import build_serving_model, convert_onnx
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import export_onnx


def train_briefly(model: nn.Module, tiny, steps: int = 30, lr: float = 1e-2) -> nn.Module:
    """``steps`` Adam steps on all of ``tiny``'s rows with the task's loss; returns the model in eval mode."""
    loss_fn = task_loss(tiny.layout.task)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    a = tiny.arrays
    dense, cat, label = torch.from_numpy(a.dense), torch.from_numpy(a.categorical), torch.from_numpy(a.label)
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(model(dense, cat), label).backward()
        opt.step()
    return model.eval()


def export_and_serve(tiny, model: nn.Module, onnx_path: Path, serving_dir: Path) -> Path:
    """The Trainer's export and conversion: ``model`` with its task's head to ONNX at ``onnx_path``, translated,
    saved as the serving SavedModel in ``serving_dir``."""
    export_onnx(ExportHead.for_layout(model.eval(), tiny.layout), tiny.arrays, onnx_path)
    network = convert_onnx(onnx_path, onnx_path.parent / "onnx2tf").network
    build_serving_model(network, tiny.tft_output, tiny.cfg, tiny.layout, serving_dir)
    return serving_dir


class NearlyCancelling(nn.Module):
    """A logit computed as (2048 + 0.3 tanh(score)) - 2048: exact in float32; float16 spaces its values 2 apart
    near 2048, so the small part rounds away and every probability becomes 0.5 (every decision positive)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.linear = nn.Linear(len(spec.dense_features), 1)
        self.embedding = nn.Embedding(spec.cardinalities[0], 1)

    def forward(self, dense, categorical):
        score = self.linear(dense).squeeze(1) + self.embedding(categorical[:, 0]).squeeze(1)
        return (2048.0 + 0.3 * torch.tanh(score)) - 2048.0
