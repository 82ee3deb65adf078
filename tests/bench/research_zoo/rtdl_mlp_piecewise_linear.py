"""MLP-QLR from rtdl_num_embeddings==0.0.12 (Gorishniy et al., "On Embeddings for Numerical Features in
Tabular Deep Learning", NeurIPS 2022, Section 3.2): ``rtdl_num_embeddings.PiecewiseLinearEmbeddings``
(piecewise-linear encoding -> per-feature Linear -> ReLU; ``version="A"``, the paper's parametrization)
before ``rtdl_revisiting_models.MLP`` (0.0.2), as the package's README builds MLP-QLR.

Bins: the paper computes quantile bins from the training data (``compute_bins``); a factory sees no data, so
the edges are the quantiles of a standard normal, the distribution the pipeline's z-scored dense features
(pipeline/transform/preprocessing.py ``z_scored``: mean 0, variance 1 on the training data) are standardized towards:
the ``n_bins - 1`` inner edges are ``Phi^-1(k / n_bins)``, k = 1..n_bins-1, and the outer edges are -3 and 3
(``Phi^-1(0)`` and ``Phi^-1(1)`` are infinite); values beyond them extrapolate linearly in the first/last bin,
as the package's encoding does. The same edges serve every dense feature.

Adapter: dense -> ``PiecewiseLinearEmbeddings`` ``[batch, n_dense, d_embedding]``, categorical ids ->
``rtdl_revisiting_models.CategoricalEmbeddings``; both flattened, concatenated -> ``MLP``; ``[batch, 1]`` is
squeezed to ``[batch]``. Dropout is the only randomness and is off in eval mode.
"""

import torch
from rtdl_num_embeddings import PiecewiseLinearEmbeddings
from rtdl_revisiting_models import MLP, CategoricalEmbeddings
from torch import nn


def standard_normal_bins(n_features: int, n_bins: int, outer: float = 3.0) -> list[torch.Tensor]:
    inner = torch.special.ndtri(torch.linspace(0.0, 1.0, n_bins + 1, dtype=torch.float64)[1:-1])
    edges = torch.cat([torch.tensor([-outer], dtype=torch.float64), inner, torch.tensor([outer], dtype=torch.float64)])
    return [edges.float() for _ in range(n_features)]


class RtdlMLPQLR(nn.Module):
    def __init__(
        self, spec, n_bins: int, d_embedding: int, n_blocks: int, d_block: int, dropout: float, d_cat_embedding: int
    ) -> None:
        super().__init__()
        n_dense = len(spec.dense_features)
        self.num_embeddings = PiecewiseLinearEmbeddings(
            standard_normal_bins(n_dense, n_bins), d_embedding, activation=True, version="A"
        )
        self.cat_embeddings = CategoricalEmbeddings(list(spec.cardinalities), d_cat_embedding)
        d_in = n_dense * d_embedding + len(spec.cardinalities) * d_cat_embedding
        self.mlp = MLP(d_in=d_in, d_out=spec.num_outputs, n_blocks=n_blocks, d_block=d_block, dropout=dropout)

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.num_embeddings(dense).flatten(1), self.cat_embeddings(categorical).flatten(1)], dim=1)
        out = self.mlp(x)
        return out.squeeze(-1) if out.shape[-1] == 1 else out


def build(
    spec,
    n_bins: int = 16,
    d_embedding: int = 24,
    n_blocks: int = 2,
    d_block: int = 64,
    dropout: float = 0.1,
    d_cat_embedding: int = 8,
) -> nn.Module:
    return RtdlMLPQLR(spec, n_bins, d_embedding, n_blocks, d_block, dropout, d_cat_embedding)
