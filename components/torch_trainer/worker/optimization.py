"""What the Trainer optimizes with: the optimizer, the learning-rate schedule and multiclass class weights."""

from __future__ import annotations

import logging
import math

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.spec import MULTICLASS, ModelSpec

logger = logging.getLogger("torchtfx.train")

_OPTIMIZERS = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}


def make_optimizer(model: nn.Module, hp: TrainerHParams) -> torch.optim.Optimizer:
    optimizer = _OPTIMIZERS[hp.optimizer]
    extra = {"momentum": 0.9, "nesterov": True} if hp.optimizer == "sgd" else {}
    return optimizer(model.parameters(), lr=hp.learning_rate, weight_decay=hp.weight_decay, **extra)


def make_schedule(optimizer: torch.optim.Optimizer, hp: TrainerHParams, steps_per_epoch: int):
    """Per-step learning-rate factor: constant, or a cosine from 1 to 0 over every planned step."""
    total = max(1, hp.epochs * steps_per_epoch)
    if hp.lr_schedule == "cosine":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * step / total)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)


def balanced_class_weights(
    train_shard: ArraySplit, spec: ModelSpec | None, device: torch.device, log: bool
) -> torch.Tensor | None:
    """n / (K * n_k) over the whole train split: shard counts are summed over ranks (a collective: every rank
    calls it), so every rank weighs alike. A class absent from the train data gets weight 0."""
    if spec is None or spec.task != MULTICLASS:
        return None
    counts = np.bincount(train_shard.label.astype(np.int64), minlength=spec.num_outputs)[: spec.num_outputs]
    totals = torch.tensor(counts, dtype=torch.float64, device=device)
    dist.all_reduce(totals)
    weights = torch.where(totals > 0, totals.sum() / (spec.num_outputs * totals.clamp(min=1)), 0.0)
    if log:
        logger.info("Balanced class weights: %s", [round(w, 3) for w in weights.tolist()])
    return weights.float()
