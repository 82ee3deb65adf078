"""Test models, each written the way research code is, that need a bridge repair or exercise an op family.

Factories ``f(spec)`` as a user would name them: ``tests/.../bridge_models.py:batch_from_len``.
"""

from __future__ import annotations

import torch
from torch import nn


class _Tokens(nn.Module):
    """Dense features and categorical embeddings as tokens [batch, features, d]."""

    def __init__(self, spec, d: int = 8) -> None:
        super().__init__()
        self.dense_weight = nn.Parameter(torch.randn(len(spec.dense_features), d) * 0.3)
        self.embeddings = nn.ModuleList(nn.Embedding(c, d) for c in spec.cardinalities)

    def forward(self, dense, categorical):
        tokens = [dense[:, :, None] * self.dense_weight]
        tokens += [emb(categorical[:, i])[:, None, :] for i, emb in enumerate(self.embeddings)]
        return torch.cat(tokens, dim=1)


class BatchFromLen(nn.Module):
    """Multi-head attention that reads the batch size with ``len(x)``: the legacy exporter bakes it."""

    def __init__(self, spec, d: int = 8, heads: int = 2) -> None:
        super().__init__()
        self.tokens, self.heads = _Tokens(spec, d), heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, 1)

    def forward(self, dense, categorical):
        x = self.tokens(dense, categorical)
        batch, n, d = len(x), x.shape[1], x.shape[2]
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        split = lambda t: t.reshape(batch, n, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(q), split(k), split(v)
        attn = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        mixed = (attn @ v).transpose(1, 2).reshape(batch * n, d)
        return self.out(mixed).reshape(batch, n).mean(dim=1)


class GatherAlongFeatures(nn.Module):
    """Picks, per row, the embedding dimension chosen by a learned router: ``torch.gather`` along dim 1
    (ONNX GatherElements)."""

    def __init__(self, spec, d: int = 6) -> None:
        super().__init__()
        self.tokens = _Tokens(spec, d)
        n = len(spec.dense_features) + len(spec.cardinalities)
        self.router = nn.Linear(n * d, n)
        self.out = nn.Linear(4, 1)  # mean and max of the two picked tokens

    def forward(self, dense, categorical):
        x = self.tokens(dense, categorical)  # [batch, n, d]
        choice = self.router(x.flatten(1)).argsort(dim=1)[:, :2]  # [batch, 2] token ids
        index = choice[:, :, None].expand(-1, -1, x.shape[2])
        picked = torch.gather(x, 1, index)  # [batch, 2, d]
        return self.out(torch.cat([picked.mean(-1), picked.amax(-1)], dim=1)).squeeze(1)


class EinsumBilinear(nn.Module):
    """A bilinear interaction layer written with ``einsum``, and a hand-written (decomposed) LayerNorm."""

    def __init__(self, spec, d: int = 6) -> None:
        super().__init__()
        self.tokens = _Tokens(spec, d)
        self.w = nn.Parameter(torch.randn(d, d) * 0.2)
        self.gain, self.eps = nn.Parameter(torch.ones(d)), 1e-5

    def forward(self, dense, categorical):
        x = self.tokens(dense, categorical)
        mean = x.mean(-1, keepdim=True)
        var = (x - mean).pow(2).mean(-1, keepdim=True)
        x = (x - mean) / torch.sqrt(var + self.eps) * self.gain
        pairs = torch.einsum("bnd,de,bme->bnm", x, self.w, x)
        return torch.tanh(pairs).sum(dim=(1, 2)) / x.shape[1]


class CumulativeSum(nn.Module):
    """Uses ``torch.cumsum`` (ONNX CumSum), which the translator does not have."""

    def __init__(self, spec) -> None:
        super().__init__()
        self.out = nn.Linear(len(spec.dense_features), 1)

    def forward(self, dense, categorical):
        return self.out(torch.cumsum(dense, dim=1)).squeeze(1) + 0 * categorical[:, 0]


def batch_from_len(spec):
    return BatchFromLen(spec)


def gather_along_features(spec):
    return GatherAlongFeatures(spec)


def einsum_bilinear(spec):
    return EinsumBilinear(spec)


def cumulative_sum(spec):
    return CumulativeSum(spec)
