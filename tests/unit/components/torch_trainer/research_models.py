"""Small models of the failure kinds research code brings (issue #27 point 3), written as researchers write them."""

from __future__ import annotations

import torch
from torch import nn

from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.components.torch_trainer.modeling.zoo.inputs import embed_and_concat, embedding_tables


class AttentiveMaskNet(nn.Module):
    """An attentive feature mask over ghost-batch-normed inputs, with a pretraining decoder that supervised
    training never calls: its parameters receive no gradient, which stops DDP's reducer."""

    def __init__(self, spec: ModelSpec, virtual_batch: int = 16) -> None:
        super().__init__()
        self.tables, width = embedding_tables(spec, 4)
        self.virtual_batch = virtual_batch
        self.ghost_norm = nn.BatchNorm1d(width)
        self.attention = nn.Linear(width, width)
        self.head = nn.Linear(width, 1)
        self.decoder = nn.Linear(width, width)  # self-supervised pretraining only

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        x = embed_and_concat(self.tables, dense, categorical)
        if self.training:  # ghost batch norm: statistics per virtual batch
            x = torch.cat([self.ghost_norm(c) if len(c) > 1 else c for c in x.split(self.virtual_batch)])
        else:
            x = self.ghost_norm(x)
        mask = torch.softmax(self.attention(x), dim=1)
        return self.head(x * mask).squeeze(1)


class AuxLossMixture(nn.Module):
    """Two experts under a softmax gate; forward returns ``(scores, aux_loss)``, the aux loss pulling
    ``balance`` towards zero (a stand-in for a load-balancing loss whose effect a test can see)."""

    def __init__(self, spec: ModelSpec, aux_weight: float = 1.0) -> None:
        super().__init__()
        self.tables, width = embedding_tables(spec, 4)
        self.gate = nn.Linear(width, 2)
        self.experts = nn.ModuleList(nn.Linear(width, 1) for _ in range(2))
        self.balance = nn.Parameter(torch.tensor(3.0))
        self.aux_weight = aux_weight

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor):
        x = embed_and_concat(self.tables, dense, categorical)
        weights = torch.softmax(self.gate(x), dim=1)
        scores = sum(weights[:, i : i + 1] * expert(x) for i, expert in enumerate(self.experts)).squeeze(1)
        return scores + 0 * self.balance, self.aux_weight * self.balance**2


class NoisyGate(nn.Module):
    """Noisy top-1 gating that forgets to switch its noise off in eval mode."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.randn_like(x)


class NoisyRouting(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.tables, width = embedding_tables(spec, 4)
        self.gate = NoisyGate()
        self.head = nn.Linear(width, 1)

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        return self.head(self.gate(embed_and_concat(self.tables, dense, categorical))).squeeze(1)


def attentive_mask(spec: ModelSpec) -> nn.Module:
    return AttentiveMaskNet(spec)


def aux_loss_mixture(spec: ModelSpec, aux_weight: float = 1.0) -> nn.Module:
    return AuxLossMixture(spec, aux_weight)


def noisy_routing(spec: ModelSpec) -> nn.Module:
    return NoisyRouting(spec)


class MedianCentered(nn.Module):
    """Each row's features centred on their median (``torch.quantile``): the legacy exporter has no
    ``aten::quantile``; torch.export's exporter writes it (TopK, GatherElements, ...)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.tables, width = embedding_tables(spec, 4)
        self.head = nn.Linear(width, 1)

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        x = embed_and_concat(self.tables, dense, categorical)
        return self.head(x - torch.quantile(x, 0.5, dim=1, keepdim=True)).squeeze(1)


def median_centered(spec: ModelSpec) -> nn.Module:
    return MedianCentered(spec)
