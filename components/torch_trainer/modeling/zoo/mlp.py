"""The default model: one embedding per categorical feature, concatenated with the dense features, through
an MLP.

Each embedding is looked up on a 1-D id column and every intermediate tensor stays 2-D.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from torchtfx.components.torch_trainer.modeling.spec import ModelSpec, embedding_dims


class TabularMLP(nn.Module):
    def __init__(self, spec: ModelSpec, hidden_units: Sequence[int], dropout: float, max_embedding_dim: int) -> None:
        super().__init__()
        dims = embedding_dims(spec.cardinalities, max_embedding_dim)
        self.embeddings = nn.ModuleList(
            nn.Embedding(card, dim) for card, dim in zip(spec.cardinalities, dims, strict=True)
        )
        width = len(spec.dense_features) + sum(dims)
        layers: list[nn.Module] = []
        for units in hidden_units:
            layers += [nn.Linear(width, units), nn.ReLU(), nn.Dropout(dropout)]
            width = units
        layers.append(nn.Linear(width, spec.num_outputs))
        self.mlp = nn.Sequential(*layers)
        self.squeeze = spec.num_outputs == 1

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        parts = [dense] + [emb(categorical[:, i]) for i, emb in enumerate(self.embeddings)]
        if not self.embeddings:  # keep the input in the exported graph: serving always feeds both
            parts.append(categorical[:, :0].to(dense.dtype))
        out = self.mlp(torch.cat(parts, dim=1))
        return out.squeeze(1) if self.squeeze else out


def build(
    spec: ModelSpec, hidden_units: Sequence[int] = (128, 64), dropout: float = 0.1, max_embedding_dim: int = 16
) -> TabularMLP:
    return TabularMLP(spec, tuple(hidden_units), dropout, max_embedding_dim)
