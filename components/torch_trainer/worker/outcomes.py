"""What the training loop hands to rank 0's publish step (explicit values, not the Trainer's attributes)."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Global eval loss and the task's metrics (every rank gets the same numbers), with the raw scores."""

    loss: float
    metrics: dict[str, float]
    scores: np.ndarray
    labels: np.ndarray


@dataclasses.dataclass(frozen=True)
class TrainingRun:
    """What the training loop did, for rank 0's report."""

    epochs_run: int
    examples_per_second: float
    seconds: float
    train_examples: int  # per epoch, over all ranks
    world_size: int
    device: str
    history: list[dict[str, float]]


def improves(loss: float, best: float, min_delta: float) -> bool:
    """Whether an epoch's eval loss counts as better than the best so far for early stopping: lower by more than
    ``min_delta`` of the best's size (and by more than 1e-6 in all)."""
    if not np.isfinite(best):  # the first epoch: any finite loss is the best so far
        return bool(np.isfinite(loss))
    return loss < best - max(1e-6, min_delta * abs(best))
