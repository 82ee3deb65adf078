"""What the project adds around a user's model: the training loss and the export head.

The user's ``forward`` returns raw scores; the loss is the task's unless the model defines
``loss(outputs, labels)``, and the exported graph ends in the task's link (sigmoid, softmax, identity).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from torchtfx.components.torch_trainer.modeling.spec import BINARY, MULTICLASS, REGRESSION, TASKS

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def task_loss(task: str) -> LossFn:
    if task == BINARY:
        return nn.BCEWithLogitsLoss()
    if task == MULTICLASS:
        ce = nn.CrossEntropyLoss()
        return lambda logits, labels: ce(logits, labels.long())
    if task == REGRESSION:
        return nn.MSELoss()
    raise ValueError(f"unknown task {task!r}")


def loss_for(model: nn.Module, task: str) -> LossFn:
    """The model's own ``loss(outputs, labels)`` when it has one, else the task's."""
    own = getattr(model, "loss", None)
    return own if callable(own) else task_loss(task)


class ExportHead(nn.Module):
    """The exported graph: the user's network followed by the task's link function."""

    def __init__(self, model: nn.Module, task: str) -> None:
        super().__init__()
        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}")
        self.model, self.task = model, task

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        scores = self.model(dense, categorical)
        if self.task == BINARY:
            return torch.sigmoid(scores)
        if self.task == MULTICLASS:
            return torch.softmax(scores, dim=-1)
        return scores
