"""FT-Transformer (Gorishniy et al. 2021, "Revisiting Deep Learning Models for Tabular Data").

A feature tokenizer turns every feature into a ``d_token``-wide token (dense: ``x * W_j + b_j``;
categorical: an embedding row plus a per-feature bias), a learned [CLS] token is appended, pre-norm
Transformer blocks (multi-head self-attention and a ReGLU or GEGLU feed-forward) mix the tokens, and the
head ``LayerNorm -> ReLU -> Linear`` reads the outputs off the [CLS] token. Initialization follows the
paper's reference implementation (rtdl).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.components.torch_trainer.modeling.zoo.sizes import check_sizes

Activation = Literal["reglu", "geglu"]


def _uniform_token_init(*shape: int) -> nn.Parameter:
    # rtdl's "uniform" token initialization: U(-1/sqrt(d), 1/sqrt(d)), the scale of nn.Linear(d, ...).
    bound = 1 / math.sqrt(shape[-1])
    return nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))


class FeatureTokenizer(nn.Module):
    """``[batch, n_dense]`` floats and ``[batch, n_cat]`` ids to ``[batch, n_dense + n_cat, d_token]``."""

    def __init__(self, n_dense: int, cardinalities: tuple[int, ...], d_token: int) -> None:
        super().__init__()
        self.d_token = d_token
        self.n_dense, self.n_categorical = n_dense, len(cardinalities)
        if n_dense:
            self.dense_weight = _uniform_token_init(n_dense, d_token)
            self.dense_bias = _uniform_token_init(n_dense, d_token)
        if cardinalities:
            # One table for all features: feature j's ids are shifted by the sum of the earlier cardinalities.
            # Derived from the spec, so not saved with the weights.
            cards = torch.tensor(cardinalities, dtype=torch.int64)
            self.register_buffer("offsets", cards.cumsum(0) - cards, persistent=False)
            self.register_buffer("cardinalities", cards, persistent=False)
            self.embedding = nn.Embedding(sum(cardinalities), d_token)
            nn.init.uniform_(self.embedding.weight, -1 / math.sqrt(d_token), 1 / math.sqrt(d_token))
            self.categorical_bias = _uniform_token_init(len(cardinalities), d_token)

    def _check_ids(self, categorical: torch.Tensor) -> None:
        # In the shared table an id past its feature's cardinality would silently read the next feature's
        # rows, where one nn.Embedding per feature raises; keep that loud failure outside the export trace.
        if torch.onnx.is_in_onnx_export():
            return
        bad = (categorical < 0) | (categorical >= self.cardinalities)
        if bool(bad.any()):
            column = int(bad.any(dim=0).nonzero()[0])
            raise IndexError(f"categorical column {column}: id out of range [0, {int(self.cardinalities[column])})")

    def _no_tokens(self, columns: torch.Tensor) -> torch.Tensor:
        # A zero-width input becomes zero tokens rather than going unused: an unused input would be dropped
        # from the exported graph, whose consumers expect both (dense, categorical).
        return columns[..., None].expand(-1, -1, self.d_token).to(torch.float32)

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        if self.n_dense:
            dense_tokens = dense[..., None] * self.dense_weight + self.dense_bias
        else:
            dense_tokens = self._no_tokens(dense)
        if self.n_categorical:
            self._check_ids(categorical)
            categorical_tokens = self.embedding(categorical + self.offsets) + self.categorical_bias
        else:
            categorical_tokens = self._no_tokens(categorical)
        return torch.cat([dense_tokens, categorical_tokens], dim=1)


class MultiheadSelfAttention(nn.Module):
    def __init__(self, d: int, n_heads: int, dropout: float) -> None:
        super().__init__()
        if d % n_heads:
            raise ValueError(f"d_token {d} is not divisible by n_heads {n_heads}")
        self.n_heads, self.d_head = n_heads, d // n_heads
        self.w_q, self.w_k, self.w_v, self.w_out = (nn.Linear(d, d) for _ in range(4))
        self.dropout = nn.Dropout(dropout)
        for linear in (self.w_q, self.w_k, self.w_v):
            # Gain 1/sqrt(2) as in rtdl: W_q, W_k, W_v stand for one [d, 3d] projection split in three.
            nn.init.xavier_uniform_(linear.weight, gain=1 / math.sqrt(2))
            nn.init.zeros_(linear.bias)
        nn.init.zeros_(self.w_out.bias)

    def _split_heads(self, x: torch.Tensor, batch: int, tokens: int) -> torch.Tensor:
        return x.reshape(batch, tokens, self.n_heads, self.d_head).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Sizes read off the shape (not len(x)) so that the exported graph keeps the batch axis dynamic.
        batch, tokens, d = x.shape
        q = self._split_heads(self.w_q(x), batch, tokens)
        k = self._split_heads(self.w_k(x), batch, tokens)
        v = self._split_heads(self.w_v(x), batch, tokens)
        attention = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_head), dim=-1)
        out = self.dropout(attention) @ v
        return self.w_out(out.transpose(1, 2).reshape(batch, tokens, d))


class GatedFeedForward(nn.Module):
    """``Linear(a * act(b))`` with ``a, b`` the halves of ``Linear(x)``: ReGLU (ReLU) or GEGLU (exact GELU)."""

    def __init__(self, d: int, d_hidden: int, activation: Activation, dropout: float) -> None:
        super().__init__()
        if activation not in ("reglu", "geglu"):
            raise ValueError(f"activation {activation!r} is not 'reglu' or 'geglu'")
        self.gate = F.relu if activation == "reglu" else F.gelu
        self.linear_first = nn.Linear(d, 2 * d_hidden)
        self.dropout = nn.Dropout(dropout)
        self.linear_second = nn.Linear(d_hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.linear_first(x).chunk(2, dim=-1)
        return self.linear_second(self.dropout(a * self.gate(b)))


class TransformerBlock(nn.Module):
    def __init__(
        self,
        d: int,
        n_heads: int,
        d_ffn: int,
        activation: Activation,
        dropouts: tuple[float, float, float],
        first: bool,
    ) -> None:
        super().__init__()
        attention_dropout, ffn_dropout, residual_dropout = dropouts
        # The paper drops the first block's attention pre-norm: its input is the tokenizer's, not a residual sum.
        self.attention_norm = nn.Identity() if first else nn.LayerNorm(d)
        self.attention = MultiheadSelfAttention(d, n_heads, attention_dropout)
        self.ffn_norm = nn.LayerNorm(d)
        self.ffn = GatedFeedForward(d, d_ffn, activation, ffn_dropout)
        self.residual_dropout = nn.Dropout(residual_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.residual_dropout(self.attention(self.attention_norm(x)))
        return x + self.residual_dropout(self.ffn(self.ffn_norm(x)))


class FTTransformer(nn.Module):
    def __init__(
        self,
        spec: ModelSpec,
        d_token: int,
        n_blocks: int,
        n_heads: int,
        ffn_factor: float,
        activation: Activation,
        dropouts: tuple[float, float, float],
    ) -> None:
        super().__init__()
        self.tokenizer = FeatureTokenizer(len(spec.dense_features), spec.cardinalities, d_token)
        self.cls = _uniform_token_init(d_token)
        d_ffn = int(d_token * ffn_factor)
        self.blocks = nn.Sequential(
            *(TransformerBlock(d_token, n_heads, d_ffn, activation, dropouts, i == 0) for i in range(n_blocks))
        )
        self.head = nn.Sequential(nn.LayerNorm(d_token), nn.ReLU(), nn.Linear(d_token, spec.num_outputs))
        self.squeeze = spec.num_outputs == 1

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        tokens = self.tokenizer(dense, categorical)
        batch, _, d = tokens.shape
        x = torch.cat([tokens, self.cls.expand(batch, 1, d)], dim=1)
        out = self.head(self.blocks(x)[:, -1])
        return out.squeeze(1) if self.squeeze else out


def build(
    spec: ModelSpec,
    d_token: int = 32,
    n_blocks: int = 2,
    n_heads: int = 4,
    ffn_factor: float = 4 / 3,
    activation: Activation = "reglu",
    attention_dropout: float = 0.2,
    ffn_dropout: float = 0.1,
    residual_dropout: float = 0.0,
) -> FTTransformer:
    check_sizes(d_token=d_token, n_blocks=n_blocks, n_heads=n_heads)
    dropouts = (attention_dropout, ffn_dropout, residual_dropout)
    return FTTransformer(spec, d_token, n_blocks, n_heads, ffn_factor, activation, dropouts)
