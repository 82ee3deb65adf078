"""ResNet for tabular data (Gorishniy et al. 2021, "Revisiting Deep Learning Models for Tabular Data").

The MLP's input (one embedding per categorical feature, concatenated with the dense features) is projected
to width ``d`` and passed through residual blocks ``x + Dropout(Linear(Dropout(ReLU(Linear(Norm(x))))))``,
then ``Norm -> ReLU -> Linear`` to the outputs. Every intermediate tensor stays 2-D.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.components.torch_trainer.modeling.zoo.inputs import embed_and_concat, embedding_tables
from torchtfx.components.torch_trainer.modeling.zoo.sizes import check_sizes

Norm = Literal["batchnorm", "layernorm"]


def _norm(kind: Norm, width: int) -> nn.Module:
    if kind == "batchnorm":
        return nn.BatchNorm1d(width)
    if kind == "layernorm":
        return nn.LayerNorm(width)
    raise ValueError(f"norm {kind!r} is not 'batchnorm' or 'layernorm'")


class ResidualBlock(nn.Module):
    def __init__(self, d: int, d_hidden: int, norm: Norm, hidden_dropout: float, residual_dropout: float) -> None:
        super().__init__()
        self.norm = _norm(norm, d)
        self.linear_first = nn.Linear(d, d_hidden)
        self.hidden_dropout = nn.Dropout(hidden_dropout)
        self.linear_second = nn.Linear(d_hidden, d)
        self.residual_dropout = nn.Dropout(residual_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.hidden_dropout(torch.relu(self.linear_first(self.norm(x))))
        return x + self.residual_dropout(self.linear_second(z))


class TabularResNet(nn.Module):
    def __init__(
        self,
        spec: ModelSpec,
        d: int,
        n_blocks: int,
        d_hidden_factor: float,
        norm: Norm,
        hidden_dropout: float,
        residual_dropout: float,
        max_embedding_dim: int,
    ) -> None:
        super().__init__()
        self.embeddings, width = embedding_tables(spec, max_embedding_dim)
        self.first = nn.Linear(width, d)
        d_hidden = int(d * d_hidden_factor)
        self.blocks = nn.Sequential(
            *(ResidualBlock(d, d_hidden, norm, hidden_dropout, residual_dropout) for _ in range(n_blocks))
        )
        # The blocks are pre-norm, so their sum is normalized once more before the head.
        self.head = nn.Sequential(_norm(norm, d), nn.ReLU(), nn.Linear(d, spec.num_outputs))
        self.squeeze = spec.num_outputs == 1

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        out = self.head(self.blocks(self.first(embed_and_concat(self.embeddings, dense, categorical))))
        return out.squeeze(1) if self.squeeze else out


def build(
    spec: ModelSpec,
    d: int = 128,
    n_blocks: int = 2,
    d_hidden_factor: float = 2.0,
    norm: Norm = "batchnorm",
    hidden_dropout: float = 0.1,
    residual_dropout: float = 0.0,
    max_embedding_dim: int = 16,
) -> TabularResNet:
    check_sizes(d=d, n_blocks=n_blocks, max_embedding_dim=max_embedding_dim)
    return TabularResNet(spec, d, n_blocks, d_hidden_factor, norm, hidden_dropout, residual_dropout, max_embedding_dim)
