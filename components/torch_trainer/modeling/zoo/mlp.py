"""The default model: one embedding per categorical feature, concatenated with the dense features, through
an MLP.

Each embedding is looked up on a 1-D id column and every intermediate tensor stays 2-D.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.components.torch_trainer.modeling.zoo.inputs import embed_and_concat, embedding_tables
from torchtfx.components.torch_trainer.modeling.zoo.sizes import check_sizes


class TabularMLP(nn.Module):
    def __init__(self, spec: ModelSpec, hidden_units: Sequence[int], dropout: float, max_embedding_dim: int) -> None:
        super().__init__()
        self.embeddings, width = embedding_tables(spec, max_embedding_dim)
        layers: list[nn.Module] = []
        for units in hidden_units:
            layers += [nn.Linear(width, units), nn.ReLU(), nn.Dropout(dropout)]
            width = units
        layers.append(nn.Linear(width, spec.num_outputs))
        self.mlp = nn.Sequential(*layers)
        self.squeeze = spec.num_outputs == 1

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        out = self.mlp(embed_and_concat(self.embeddings, dense, categorical))
        return out.squeeze(1) if self.squeeze else out


def build(
    spec: ModelSpec, hidden_units: Sequence[int] = (128, 64), dropout: float = 0.1, max_embedding_dim: int = 16
) -> TabularMLP:
    check_sizes(hidden_units=hidden_units, max_embedding_dim=max_embedding_dim)
    return TabularMLP(spec, tuple(hidden_units), dropout, max_embedding_dim)
