"""What the Trainer optimizes with: the optimizer and its parameter groups, the learning-rate schedule with its
warmup, mixed precision on CUDA, and multiclass class weights."""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.spec import MULTICLASS, ModelSpec
from torchtfx.data.config.model import ModelConfigError

logger = logging.getLogger("torchtfx.train")

_OPTIMIZERS = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}
PRETRAINED, HEAD = "pretrained", "head"
# torch's normalization layers; a module of another library counts as one when its class name ends in "norm"
# (transformers' T5LayerNorm, LlamaRMSNorm, ...: not subclasses of these).
_NORMS = (nn.LayerNorm, nn.GroupNorm, nn.RMSNorm, nn.LocalResponseNorm, nn.modules.batchnorm._NormBase)


def _is_norm(module: nn.Module) -> bool:
    return isinstance(module, _NORMS) or type(module).__name__.lower().endswith("norm")


def _pretrained_type() -> type | None:
    """``transformers.PreTrainedModel`` when transformers is loaded, else None: a model holding one has imported
    it, and torchtfx runs without transformers installed."""
    modeling_utils = sys.modules.get("transformers.modeling_utils")
    return getattr(modeling_utils, "PreTrainedModel", None)


def _parameter_roles(model: nn.Module) -> dict[str, tuple[str, bool]]:
    """Every trainable parameter's name -> (PRETRAINED or HEAD, whether weight decay applies). Pretrained: it
    lives inside a ``transformers.PreTrainedModel``. No decay: a bias, or any parameter of a normalization layer
    (the rule of transformers' examples, ``no_decay = ["bias", "LayerNorm.weight"]``, by module type)."""
    pretrained_type = _pretrained_type()
    roles: dict[str, tuple[str, bool]] = {}
    seen: set[int] = set()

    def visit(module: nn.Module, prefix: str, pretrained: bool) -> None:
        pretrained = pretrained or (pretrained_type is not None and isinstance(module, pretrained_type))
        norm = _is_norm(module)
        for name, param in module.named_parameters(prefix=prefix, recurse=False):
            if id(param) in seen or not param.requires_grad:  # tied weights: the first owner's group
                continue
            seen.add(id(param))
            roles[name] = (PRETRAINED if pretrained else HEAD, not (norm or name.rsplit(".", 1)[-1] == "bias"))
        for child_name, child in module.named_children():
            visit(child, f"{prefix}.{child_name}" if prefix else child_name, pretrained)

    visit(model, "", False)
    return roles


def parameter_groups(model: nn.Module, hp: TrainerHParams) -> list[dict]:
    """The optimizer's parameter groups, generic over models: the pretrained body at ``learning_rate`` and the
    rest (a new head, tabular embeddings) at ``head_learning_rate`` (None: ``learning_rate``), each split into
    decayed parameters and biases/normalization weights at weight decay 0. Every model gets the decay split
    (standard practice); frozen parameters (``requires_grad`` False) are left out."""
    rates = {PRETRAINED: hp.learning_rate, HEAD: hp.head_learning_rate or hp.learning_rate}
    named = dict(model.named_parameters())
    groups: dict[tuple[str, bool], list[str]] = {}
    for name, role in _parameter_roles(model).items():
        groups.setdefault(role, []).append(name)
    return [
        {
            "name": f"{part}{'' if decay else '_no_decay'}",
            "params": [named[name] for name in names],
            "lr": rates[part],
            "weight_decay": hp.weight_decay if decay else 0.0,
        }
        for (part, decay), names in sorted(groups.items(), key=lambda item: (item[0][0] != PRETRAINED, not item[0][1]))
    ]


def make_optimizer(model: nn.Module, hp: TrainerHParams, log: bool = False) -> torch.optim.Optimizer:
    """The configured optimizer over :func:`parameter_groups`; ``log``: name each group's size and rates."""
    groups = parameter_groups(model, hp)
    if not groups:
        raise ModelConfigError(
            "the model has no trainable parameters (every one has requires_grad False); unfreeze at least the head"
        )
    if log:
        for group in groups:
            count = sum(p.numel() for p in group["params"])
            logger.info(
                "Parameter group %s: %s values, lr %g, weight decay %g",
                group["name"],
                count,
                group["lr"],
                group["weight_decay"],
            )
    extra = {"momentum": 0.9, "nesterov": True} if hp.optimizer == "sgd" else {}
    return _OPTIMIZERS[hp.optimizer](groups, lr=hp.learning_rate, weight_decay=hp.weight_decay, **extra)


def lr_factor(hp: TrainerHParams, total_steps: int) -> Callable[[int], float]:
    """The learning-rate factor at each step (of every group's rate): a linear warmup from 0 over the first
    ``warmup_ratio`` of all ``total_steps`` (rounded up, as transformers' Trainer does), then constant, a cosine
    from 1 to 0, or a linear decay to 0 (transformers' ``get_linear_schedule_with_warmup``) over the rest."""
    total = max(1, total_steps)
    warmup = math.ceil(hp.warmup_ratio * total)
    decaying = max(1, total - warmup)

    def factor(step: int) -> float:
        if step < warmup:
            return step / warmup
        progress = min(1.0, (step - warmup) / decaying)
        if hp.lr_schedule == "cosine":
            return 0.5 * (1 + math.cos(math.pi * progress))
        if hp.lr_schedule == "linear":
            return 1.0 - progress
        return 1.0

    return factor


def make_schedule(optimizer: torch.optim.Optimizer, hp: TrainerHParams, steps_per_epoch: int):
    """Per-step learning-rate schedule over every planned step (epochs * steps per epoch): :func:`lr_factor`."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor(hp, hp.epochs * steps_per_epoch))


@dataclass(frozen=True)
class MixedPrecision:
    """How the training step runs: ``dtype`` for torch.autocast (None: full fp32), ``scaled``: a GradScaler."""

    dtype: torch.dtype | None
    scaled: bool

    @property
    def enabled(self) -> bool:
        return self.dtype is not None


def mixed_precision(device: torch.device) -> MixedPrecision:
    """AMP is on for every CUDA training run: fp16 autocast with a GradScaler (whose skipped steps the
    NonFiniteGuard counts: worker/diagnostics.py). CPU trains in fp32: autocast on CPU takes bf16 only."""
    if device.type == "cuda":
        return MixedPrecision(torch.float16, scaled=True)
    return MixedPrecision(None, scaled=False)


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
