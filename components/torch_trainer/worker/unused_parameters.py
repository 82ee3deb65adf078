"""Parameters that receive no gradient, found before DDP wraps the model.

DDP's reducer waits for a gradient from every parameter; one that the loss does not reach (a branch taken only
sometimes, an auxiliary head used in pretraining, experts that a batch's routing skips, a ghost batch norm over
chunks) stops training at the next step with "Expected to have finished reduction in the prior iteration",
even with one worker. ``find_unused_parameters=True`` lets DDP mark them ready after each backward, at the cost
of one traversal of the autograd graph per step, so it is turned on only when a dry run finds such parameters.
The dry run is a few forward/backward passes on a copy of the model, with the random state restored, so that
training draws exactly what it would have drawn without it. A parameter unused in one dry batch may be used in
another (routing), so none is frozen: DDP is told, and the names are logged.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable

import torch
import torch.distributed as dist
from torch import nn

from torchtfx.components.torch_trainer.modeling.heads import split_output

logger = logging.getLogger("torchtfx.train")

DRY_RUN_BATCHES = 4


def find_unused_parameters(
    model: nn.Module,
    batches: Iterable[tuple[tuple[torch.Tensor, ...], torch.Tensor]],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    device: torch.device,
) -> list[str]:
    """Names of the trainable parameters left without a gradient by at least one of the first batches."""
    probe = copy.deepcopy(model).train()
    unused: set[str] = set()
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        for index, (inputs, label) in enumerate(batches):
            if index == DRY_RUN_BATCHES:
                break
            probe.zero_grad(set_to_none=True)
            scores, aux_loss = split_output(probe(*(t.to(device) for t in inputs)))
            loss = loss_fn(scores.float(), label.to(device))
            (loss if aux_loss is None else loss + aux_loss).backward()
            unused |= {n for n, p in probe.named_parameters() if p.requires_grad and p.grad is None}
    return sorted(unused)


def needs_unused_parameter_search(unused: list[str], device: torch.device, is_main: bool) -> bool:
    """Whether any rank found unused parameters (every rank must build DDP alike); rank 0 logs the names."""
    flag = torch.tensor([1 if unused else 0], device=device)
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    needed = bool(flag.item())
    if needed and is_main:
        shown = ", ".join(unused[:20]) + (f", ... ({len(unused)} in all)" if len(unused) > 20 else "")
        logger.warning(
            "Parameters without a gradient in a dry run: %s. DDP runs with find_unused_parameters=True (one more "
            "pass over the autograd graph per step); remove them from the model if they are never used.",
            shown or "(on another rank)",
        )
    return needed
