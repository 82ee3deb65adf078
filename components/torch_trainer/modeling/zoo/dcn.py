"""DCN-v2, the improved Deep & Cross Network (Wang et al. 2021, "DCN V2: Improved Deep & Cross Network and
Practical Lessons for Web-scale Learning to Rank Systems").

The input ``x0`` is the MLP's (one embedding per categorical feature, concatenated with the dense features).
A cross network of full-rank layers ``x_{l+1} = x0 * (W_l x_l + b_l) + x_l`` builds explicit feature
interactions of growing degree; a deep MLP either follows it (``stacked``) or runs beside it on ``x0``
(``parallel``, outputs concatenated); a Linear head gives the outputs. Every intermediate tensor stays 2-D.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import nn

from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.components.torch_trainer.modeling.zoo.inputs import embed_and_concat, embedding_tables
from torchtfx.components.torch_trainer.modeling.zoo.sizes import check_sizes

Structure = Literal["stacked", "parallel"]


class CrossLayer(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x0: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return x0 * self.linear(x) + x


def _mlp(width: int, hidden_units: Sequence[int], dropout: float) -> tuple[nn.Module, int]:
    """The deep network and its output width (no hidden units: the identity)."""
    layers: list[nn.Module] = []
    for units in hidden_units:
        layers += [nn.Linear(width, units), nn.ReLU(), nn.Dropout(dropout)]
        width = units
    return nn.Sequential(*layers), width


class DCNv2(nn.Module):
    def __init__(
        self,
        spec: ModelSpec,
        n_cross_layers: int,
        hidden_units: Sequence[int],
        dropout: float,
        structure: Structure,
        max_embedding_dim: int,
    ) -> None:
        super().__init__()
        if structure not in ("stacked", "parallel"):
            raise ValueError(f"structure {structure!r} is not 'stacked' or 'parallel'")
        self.embeddings, width = embedding_tables(spec, max_embedding_dim)
        self.cross = nn.ModuleList(CrossLayer(width) for _ in range(n_cross_layers))
        # Stacked and parallel both feed the deep network an input of the cross network's width.
        self.deep, deep_width = _mlp(width, hidden_units, dropout)
        self.parallel = structure == "parallel"
        self.head = nn.Linear(width + deep_width if self.parallel else deep_width, spec.num_outputs)
        self.squeeze = spec.num_outputs == 1

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        x0 = embed_and_concat(self.embeddings, dense, categorical)
        x = x0
        for layer in self.cross:
            x = layer(x0, x)
        features = torch.cat([x, self.deep(x0)], dim=1) if self.parallel else self.deep(x)
        out = self.head(features)
        return out.squeeze(1) if self.squeeze else out


def build(
    spec: ModelSpec,
    n_cross_layers: int = 3,
    hidden_units: Sequence[int] = (128, 64),
    dropout: float = 0.1,
    structure: Structure = "stacked",
    max_embedding_dim: int = 16,
) -> DCNv2:
    check_sizes(hidden_units=hidden_units, max_embedding_dim=max_embedding_dim)
    return DCNv2(spec, n_cross_layers, tuple(hidden_units), dropout, structure, max_embedding_dim)
