"""The PyTorch model: one embedding per categorical/bucketized feature, concatenated with the dense
features, through an MLP to one logit.

Each embedding is looked up on a 1-D id column and every intermediate tensor stays 2-D, which keeps
the ONNX graph simple for onnx2tf (no layout transposes to guess).
"""

from __future__ import annotations

import torch
from torch import nn

from torchtfx.components.torch_trainer.features import FeatureLayout


class TabularModel(nn.Module):
    def __init__(
        self,
        layout: FeatureLayout,
        hidden_units: tuple[int, ...],
        dropout: float,
        max_embedding_dim: int,
    ) -> None:
        super().__init__()
        dims = layout.embedding_dims(max_embedding_dim)
        self.embeddings = nn.ModuleList(
            nn.Embedding(card, dim) for card, dim in zip(layout.cardinalities, dims, strict=True)
        )
        width = len(layout.dense) + sum(dims)
        layers: list[nn.Module] = []
        for units in hidden_units:
            layers += [nn.Linear(width, units), nn.ReLU(), nn.Dropout(dropout)]
            width = units
        layers.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        """Logits [batch] from dense float32 [batch, D] and categorical int64 [batch, C]."""
        parts = [dense] + [emb(categorical[:, i]) for i, emb in enumerate(self.embeddings)]
        return self.mlp(torch.cat(parts, dim=1)).squeeze(1)


class ProbabilityModel(nn.Module):
    """The exported graph: the same network with a sigmoid, so serving returns probabilities."""

    def __init__(self, model: TabularModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.model(dense, categorical))
