"""Is the model's eval output a function of its input? Random routing, noise or dropout left on in eval mode make
the exported graph (which has no randomness, or draws other numbers) disagree with the trained model, and the
parity gate would then fail for a reason it cannot name. Two eval passes over the same rows, every submodule's
output recorded, name the first module whose output differs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import torch
from torch import nn


@dataclasses.dataclass(frozen=True)
class Nondeterminism:
    module: str  # dotted path, "" for the model itself
    kind: str  # the module's class name
    max_diff: float

    def describe(self, model_name: str) -> str:
        where = f"module {self.module} ({self.kind})" if self.module else f"the model ({self.kind})"
        return (
            f"model {model_name!r} is not deterministic in eval mode: {where} returned outputs differing by up "
            f"to {self.max_diff:.3g} for the same input. The exported graph cannot reproduce random draws. Fix: "
            "draw randomness only when self.training is True (noise, random routing, sampling), use nn.Dropout "
            "(which eval() turns off), or pick the top-k experts deterministically at inference"
        )


def find_nondeterminism(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> Nondeterminism | None:
    """The first module, in call order, whose output differs between two eval passes over ``inputs``."""
    was_training = model.training
    model.eval()
    try:
        first, second = _pass(model, inputs), _pass(model, inputs)
    finally:
        model.train(was_training)
    for (name, kind, a), (_, _, b) in zip(first, second, strict=False):
        diff = _max_diff(a, b)
        if diff > 0:
            return Nondeterminism(name, kind, diff)
    return None


def _pass(model: nn.Module, inputs: tuple) -> list[tuple[str, str, list[torch.Tensor]]]:
    calls: list[tuple[str, str, list[torch.Tensor]]] = []
    hooks = [module.register_forward_hook(_recorder(calls, name)) for name, module in model.named_modules()]
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for hook in hooks:
            hook.remove()
    # Hooks fire as modules return (innermost first), which names the most specific module that differs.
    return calls


def _recorder(calls: list, name: str):
    def record(module: nn.Module, args, output) -> None:
        calls.append((name, type(module).__name__, [t.detach().clone() for t in _tensors(output)]))

    return record


def _tensors(value) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def _max_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    if len(a) != len(b):
        return float("inf")
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape:
            return float("inf")
        if x.is_floating_point():
            same_nan = torch.isnan(x) & torch.isnan(y)
            worst = max(worst, float(torch.where(same_nan, 0, (x - y).abs()).max()) if x.numel() else 0.0)
        elif x.numel() and not torch.equal(x, y):
            worst = max(worst, float((x.double() - y.double()).abs().max()))
    return worst
