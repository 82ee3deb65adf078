"""text_transformer with a top-k routed mixture of experts as every block's feed-forward (Shazeer et al. 2017;
GShard, Lepikhin et al. 2021; Switch Transformer, Fedus et al. 2022).

Each block: pre-norm self-attention with the padding mask (``nn.MultiheadAttention``, as :class:`SelfAttention`),
then the MoE feed-forward. The router gives softmax probabilities over the experts and ``torch.topk`` picks each
token's ``top_k`` experts (the exported graph's TopK indices are the expert choices); with ``top_k > 1`` the chosen
gates are renormalized to sum to 1 (GShard).

Capacity: routing groups are the sequences (one row's tokens, as GShard's groups and the mixture-of-experts
package's ``[batch, group, dim]`` input). An expert takes at most ``ceil(capacity_factor * top_k * n / experts)``
of a row's ``n`` real tokens ([CLS] included), all first choices before any second one, each in token order; the
rest are dropped (their MoE output is 0, the residual carries them). The capacity is computed from the row's own
token count, a tensor, never from the traced batch or length, so a row's output depends neither on the other rows
of its batch nor on its padding, in training (``capacity_factor``) and in eval (``eval_capacity_factor``, Switch's
separate inference capacity; its default 2.0 with top-2 of 4 experts is ``n``, i.e. no token is ever dropped).

Padding tokens are not routed and not counted: their router logits are zeroed (a uniform softmax, a TopK tie
resolved by index, the same in float32 and float16) and their assignments masked out before the capacity count,
the combine and the load-balancing loss. The loss is Switch's ``experts * sum_e f_e * P_e`` (``f_e``: the share of
the real tokens' choices that went to expert ``e``, before dropping; ``P_e``: its mean router probability), 1 when
balanced, times ``aux_loss_weight``, summed over the blocks, and returned as forward's ``(scores, aux_loss)`` in
training only.

The experts run densely: every expert on every token as one batched matmul (``[batch, experts, length, d_ffn]``),
combined with the sparse gate matrix. At 4 small experts that costs 4 feed-forwards and needs neither a
gather/scatter by expert (data-dependent shapes in the exported graph) nor GShard's ``[tokens, experts,
capacity]`` dispatch tensor (quadratic in the tokens).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.components.torch_trainer.modeling.zoo.sequence_inputs import (
    ATTENTION_DROPOUT,
    SelfAttention,
    SequenceClassifier,
    require_sequences,
)
from torchtfx.components.torch_trainer.modeling.zoo.sizes import check_sizes
from torchtfx.components.torch_trainer.modeling.zoo.text_transformer import ClsEncoder, Pooling


class TopKMoE(nn.Module):
    """``(x [batch, length, d], keep [batch, length]) -> (y [batch, length, d], balance loss or None)``."""

    def __init__(
        self,
        d: int,
        d_ffn: int,
        experts: int,
        top_k: int,
        capacity_factors: tuple[float | None, float | None],
        dropout: float,
    ) -> None:
        super().__init__()
        if not 1 <= top_k <= experts:
            raise ValueError(f"top_k {top_k} must be between 1 and the number of experts {experts}")
        self.experts, self.top_k = experts, top_k
        self.train_capacity, self.eval_capacity = capacity_factors
        self.router = nn.Linear(d, experts, bias=False)
        nn.init.normal_(self.router.weight, std=0.02)  # near-uniform routing at the start (Switch's small init)
        self.w_in = nn.Parameter(torch.empty(experts, d, d_ffn).uniform_(-1 / math.sqrt(d), 1 / math.sqrt(d)))
        self.b_in = nn.Parameter(torch.zeros(experts, 1, d_ffn))
        self.w_out = nn.Parameter(torch.empty(experts, d_ffn, d).uniform_(-1 / math.sqrt(d_ffn), 1 / math.sqrt(d_ffn)))
        self.b_out = nn.Parameter(torch.zeros(experts, 1, d))
        self.dropout = nn.Dropout(dropout)

    def route(self, x: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Router probabilities ``[b, l, E]``, the top-k gates ``[b, l, k]`` and assignments ``[b, l, k, E]``
        (one-hot expert per choice, zero for padding), before any capacity drop."""
        logits = self.router(x) * keep.unsqueeze(-1).to(x.dtype)
        probs = torch.softmax(logits, dim=-1)
        gates, chosen = torch.topk(probs, self.top_k, dim=-1)
        if self.top_k > 1:
            gates = gates / gates.sum(-1, keepdim=True)
        assign = F.one_hot(chosen, self.experts).to(x.dtype) * keep[..., None, None].to(x.dtype)
        return probs, gates, assign

    def within_capacity(self, assign: torch.Tensor, keep: torch.Tensor, factor: float) -> torch.Tensor:
        """1 where an assignment fits its expert's capacity in its row, else 0 (same shape as ``assign``)."""
        # Queue order per row: all first choices in token order, then all second choices, ... (GShard).
        by_choice = assign.transpose(1, 2)  # [b, k, l, E]
        position = torch.cumsum(by_choice.flatten(1, 2), dim=1).view_as(by_choice).transpose(1, 2)
        tokens = keep.to(assign.dtype).sum(1)  # [b]: the row's real tokens, a tensor at any batch and length
        capacity = torch.ceil(factor * self.top_k * tokens / self.experts)
        return (position <= capacity[:, None, None, None]).to(assign.dtype)

    def balance_loss(self, probs: torch.Tensor, assign: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """Switch's ``E * sum_e f_e * P_e`` over the batch's real tokens (1 when the load is uniform)."""
        weights = keep.unsqueeze(-1).to(probs.dtype)
        tokens = weights.sum().clamp(min=1.0)
        share = assign.sum((0, 1, 2)) / (tokens * self.top_k)  # f_e
        mean_prob = (probs * weights).sum((0, 1)) / tokens  # P_e
        return self.experts * (share * mean_prob).sum()

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        probs, gates, assign = self.route(x, keep)
        factor = self.train_capacity if self.training else self.eval_capacity
        kept = assign if factor is None else assign * self.within_capacity(assign, keep, factor)
        combine = (kept * gates.unsqueeze(-1)).sum(2)  # [b, l, E]: each token's weight per expert
        hidden = F.gelu(torch.matmul(x.unsqueeze(1), self.w_in) + self.b_in)  # [b, E, l, d_ffn]
        out = torch.matmul(self.dropout(hidden), self.w_out) + self.b_out  # [b, E, l, d]
        y = (out * combine.transpose(1, 2).unsqueeze(-1)).sum(1)
        return y, self.balance_loss(probs, assign, keep) if self.training else None


class MoEBlock(nn.Module):
    def __init__(self, d: int, n_heads: int, moe: TopKMoE, dropout: float) -> None:
        super().__init__()
        self.attention_norm, self.ffn_norm = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attention = SelfAttention(d, n_heads, dropout=ATTENTION_DROPOUT, batch_first=True)
        self.moe = moe
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        h = self.attention_norm(x)
        h, _ = self.attention(h, h, h, key_padding_mask=~keep, need_weights=False)
        x = x + self.dropout(h)
        y, aux = self.moe(self.ffn_norm(x), keep)
        return x + self.dropout(y), aux


class MoEStack(nn.Module):
    """The MoE blocks and a final LayerNorm (pre-norm blocks leave the residual stream unnormalized); the blocks'
    balance losses summed and scaled by ``aux_loss_weight`` (None in eval)."""

    def __init__(self, d_model: int, n_heads: int, moes: list[TopKMoE], dropout: float, aux_loss_weight: float):
        super().__init__()
        self.blocks = nn.ModuleList(MoEBlock(d_model, n_heads, moe, dropout) for moe in moes)
        self.norm = nn.LayerNorm(d_model)
        self.aux_loss_weight = aux_loss_weight

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        losses = []
        for block in self.blocks:
            x, aux = block(x, keep)
            if aux is not None:
                losses.append(aux)
        aux = self.aux_loss_weight * torch.stack(losses).sum() if losses else None
        return self.norm(x), aux


def build(
    spec: ModelSpec,
    d_model: int = 64,
    n_layers: int = 2,
    n_heads: int = 4,
    d_ffn: int = 128,
    experts: int = 4,
    top_k: int = 2,
    capacity_factor: float | None = 1.25,
    eval_capacity_factor: float | None = 2.0,
    aux_loss_weight: float = 0.01,
    dropout: float = 0.1,
    pooling: Pooling = "cls",
    head_hidden: int = 64,
    max_embedding_dim: int = 16,
) -> SequenceClassifier:
    """``capacity_factor`` / ``eval_capacity_factor``: None keeps every token (no capacity)."""
    check_sizes(
        d_model=d_model,
        n_layers=n_layers,
        n_heads=n_heads,
        d_ffn=d_ffn,
        experts=experts,
        top_k=top_k,
        head_hidden=head_hidden,
        max_embedding_dim=max_embedding_dim,
    )
    require_sequences(spec, "text_moe")
    factors = (capacity_factor, eval_capacity_factor)

    def stack() -> MoEStack:
        moes = [TopKMoE(d_model, d_ffn, experts, top_k, factors, dropout) for _ in range(n_layers)]
        return MoEStack(d_model, n_heads, moes, dropout, aux_loss_weight)

    encoders = [ClsEncoder(s, d_model, pooling, stack()) for s in spec.sequences]
    return SequenceClassifier(spec, encoders, head_hidden, dropout, max_embedding_dim)
