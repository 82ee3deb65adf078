"""What the project adds around a user's model: the training loss and the export head.

The user's ``forward`` returns raw scores, or ``(scores, aux_loss)`` (a mixture of experts' load-balancing
loss, added to the task loss in training and dropped from the export); the loss is the task's unless the model
defines ``loss(outputs, labels)``, and the exported graph ends in the task's link (sigmoid, softmax, identity).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from torchtfx.components.torch_trainer.modeling.features import FeatureLayout
from torchtfx.components.torch_trainer.modeling.spec import BINARY, MULTICLASS, REGRESSION, TASKS

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class ModelOutputError(TypeError):
    """The model's forward returned something other than scores or ``(scores, aux_loss)``."""


def split_output(output) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A forward's result as ``(scores, aux_loss)``: ``scores``, or ``(scores, aux_loss)`` where ``aux_loss``
    is a scalar tensor, a list/tuple of them or a dict of them (summed), or ``None``."""
    if isinstance(output, torch.Tensor):
        return output, None
    if isinstance(output, tuple | list) and len(output) == 2 and isinstance(output[0], torch.Tensor):
        scores, aux = output
        parts = list(aux.values()) if isinstance(aux, dict) else list(aux) if isinstance(aux, tuple | list) else [aux]
        parts = [p for p in parts if p is not None]
        if all(isinstance(p, torch.Tensor) and p.numel() == 1 for p in parts):
            return scores, (torch.stack([p.reshape(()).float() for p in parts]).sum() if parts else None)
    raise ModelOutputError(
        f"the model's forward returned {_describe(output)}; it must return the scores tensor, or (scores, aux_loss) "
        "with aux_loss a scalar tensor (or a list or dict of them), e.g. a mixture of experts' load-balancing loss"
    )


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, tuple | list | dict):
        return f"a {type(value).__name__} of {len(value)} ({', '.join(type(v).__name__ for v in value)})"
    return f"a {type(value).__name__}"


def task_loss(
    task: str, class_weights: torch.Tensor | None = None, regression_loss: str = "mse", huber_delta: float = 1.0
) -> LossFn:
    """Binary cross-entropy on logits; softmax cross-entropy (optionally class-weighted); MSE or Huber."""
    if task == BINARY:
        return nn.BCEWithLogitsLoss()
    if task == MULTICLASS:
        ce = nn.CrossEntropyLoss(weight=class_weights)
        return lambda logits, labels: ce(logits, labels.long())
    if task == REGRESSION:
        return nn.HuberLoss(delta=huber_delta) if regression_loss == "huber" else nn.MSELoss()
    raise ValueError(f"unknown task {task!r}")


def loss_for(model: nn.Module, task: str, **options) -> LossFn:
    """The model's own ``loss(outputs, labels)`` when it has one, else the task's (``options``: task_loss's)."""
    own = getattr(model, "loss", None)
    return own if callable(own) else task_loss(task, **options)


class ExportHead(nn.Module):
    """The exported graph: the user's network followed by the task's link function. ``log1p_target``: the
    regression model was trained on log1p(y), and serves ``expm1`` of its output, in the target's units."""

    def __init__(self, model: nn.Module, task: str, log1p_target: bool = False) -> None:
        super().__init__()
        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}")
        if log1p_target and task != REGRESSION:
            raise ValueError("log1p_target applies to regression only")
        self.model, self.task, self.log1p_target = model, task, log1p_target

    @classmethod
    def for_layout(cls, model: nn.Module, layout: FeatureLayout) -> ExportHead:
        return cls(model, layout.task, layout.log1p_target)

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor, *sequences: torch.Tensor) -> torch.Tensor:
        scores, _ = split_output(self.model(dense, categorical, *sequences))
        if self.task == BINARY:
            return torch.sigmoid(scores)
        if self.task == MULTICLASS:
            return torch.softmax(scores, dim=-1)
        # exp(x) - 1, not expm1: the ONNX exporter has no expm1 (aten::expm1 is unsupported at opset 17).
        return torch.exp(scores) - 1 if self.log1p_target else scores
