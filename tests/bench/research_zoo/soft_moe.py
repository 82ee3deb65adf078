"""Soft mixture of experts (Puigcerver et al. 2023, "From Sparse to Soft Mixtures of Experts").

From soft-moe-pytorch==0.1.9 (lucidrains): ``soft_moe_pytorch.SoftMoE``, unmodified. The adapter turns every
feature into a ``dim``-wide token (dense: ``x_j * W_j + b_j``; categorical: a row of one shared embedding
table); SoftMoE mixes the tokens into ``num_experts * num_slots`` slots, runs each expert's feed-forward on its
slots and combines them back per token; the tokens plus the MoE output are mean-pooled and a linear layer
gives the scores. Single-process experts (``is_distributed=False``: no expert parallelism across DDP ranks),
no CPU offloading, no gating noise (``add_noise`` defaults to False), so eval is deterministic.
"""

import torch
from soft_moe_pytorch import SoftMoE
from torch import nn


class SoftMoEAdapter(nn.Module):
    def __init__(self, spec, dim: int = 32, num_experts: int = 4, num_slots: int = 2, expert_mult: int = 2) -> None:
        super().__init__()
        n_dense, cards = len(spec.dense_features), tuple(spec.cardinalities)
        self.dense_weight = nn.Parameter(torch.randn(n_dense, dim) / dim**0.5)
        self.dense_bias = nn.Parameter(torch.zeros(n_dense, dim))
        self.register_buffer("offsets", torch.tensor((0, *cards[:-1])).cumsum(0), persistent=False)
        self.embedding = nn.Embedding(sum(cards), dim)
        self.moe = SoftMoE(
            dim=dim,
            num_experts=num_experts,
            num_slots=num_slots,
            expert_mult=expert_mult,
            is_distributed=False,
            offload_unused_experts_to_cpu=False,
        )
        self.head = nn.Linear(dim, spec.num_outputs)
        self.multiclass = spec.task == "multiclass"

    def forward(self, dense, categorical):
        tokens = torch.cat(
            [dense.unsqueeze(-1) * self.dense_weight + self.dense_bias, self.embedding(categorical + self.offsets)],
            dim=1,
        )  # [batch, features, dim]
        scores = self.head((tokens + self.moe(tokens)).mean(dim=1))
        return scores if self.multiclass else scores.squeeze(-1)


def build(spec, **hparams) -> nn.Module:
    return SoftMoEAdapter(spec, **hparams)
