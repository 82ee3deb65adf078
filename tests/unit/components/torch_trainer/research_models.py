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


class PeriodicMLP(nn.Module):
    """An MLP over periodic embeddings of the numeric features (Gorishniy et al. 2022): per feature,
    ``[sin(2 pi c x), cos(2 pi c x)]`` with learned frequencies ``c``, then a linear layer and ReLU."""

    def __init__(self, spec: ModelSpec, frequencies: int = 8, d: int = 8) -> None:
        super().__init__()
        self.tables, width = embedding_tables(spec, 4)
        n_dense = len(spec.dense_features)
        self.coefficients = nn.Parameter(torch.randn(n_dense, frequencies) * 0.1)
        self.project = nn.Linear(2 * frequencies, d)
        self.head = nn.Sequential(nn.Linear(width - n_dense + n_dense * d, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        angles = 2 * torch.pi * self.coefficients[None] * dense[..., None]
        periodic = torch.relu(self.project(torch.cat([torch.sin(angles), torch.cos(angles)], -1))).flatten(1)
        ids = embed_and_concat(self.tables, dense, categorical)[:, dense.shape[1] :]
        return self.head(torch.cat([periodic, ids], 1)).squeeze(1)


class Top2MoE(nn.Module):
    """A top-2 gated mixture of experts with expert capacity (Shazeer et al. 2017; the GShard/Switch dispatch):
    each row's position in its expert's queue is a ``cumsum`` over a ``one_hot`` of the routing, rows beyond the
    capacity are dropped, and the dispatch tensor is padded to the capacity; returns the load-balancing loss."""

    def __init__(self, spec: ModelSpec, experts: int = 4, capacity_factor: float = 2.0, d: int = 16) -> None:
        super().__init__()
        self.tables, width = embedding_tables(spec, 4)
        self.inp, self.gate = nn.Linear(width, d), nn.Linear(d, experts)
        self.experts = nn.Parameter(torch.randn(experts, d, d) * d**-0.5)
        self.head = nn.Linear(d, 1)
        self.count, self.capacity_factor = experts, capacity_factor

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor):
        x = torch.relu(self.inp(embed_and_concat(self.tables, dense, categorical)))
        probs = torch.softmax(self.gate(x), -1)
        weights, chosen = probs.topk(2, -1)  # [batch, 2]
        capacity = max(1, int(self.capacity_factor * 2 * x.shape[0] / self.count)) if self.training else x.shape[0]
        mask = nn.functional.one_hot(chosen, self.count).float()  # [batch, 2, experts]
        position = torch.cumsum(mask.flatten(0, 1), 0).view_as(mask) - 1  # place in each expert's queue
        kept = mask * (position < capacity).float()
        slots = nn.functional.one_hot(position.clamp(min=0).long(), capacity + 1)[..., :capacity].float()
        dispatch = torch.einsum("bke,bkec->bec", kept * weights[..., None], slots)  # [batch, experts, capacity]
        dispatch = nn.functional.pad(dispatch, (0, 1))[..., :capacity]
        expert_in = torch.einsum("bec,bd->ecd", (dispatch > 0).float(), x)
        expert_out = torch.relu(torch.einsum("ecd,edf->ecf", expert_in, self.experts))
        y = torch.einsum("bec,ecf->bf", dispatch, expert_out)
        balance = self.count * (mask[:, 0].mean(0) * probs.mean(0)).sum()
        return self.head(y).squeeze(1), 0.01 * balance


def periodic_mlp(spec: ModelSpec) -> nn.Module:
    return PeriodicMLP(spec)


def top2_moe(spec: ModelSpec) -> nn.Module:
    return Top2MoE(spec)


class BatchSpecialized(MedianCentered):
    """``MedianCentered`` whose code branches on the batch size: torch.export specializes the batch dimension."""

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        scores = super().forward(dense, categorical)
        return scores * 2 if dense.shape[0] == 17 else scores


def batch_specialized(spec: ModelSpec) -> nn.Module:
    return BatchSpecialized(spec)
