"""MLP from rtdl_revisiting_models==0.0.2 (Gorishniy et al., "Revisiting Deep Learning Models for Tabular
Data", NeurIPS 2021, Section 3.1): ``rtdl_revisiting_models.MLP``.

Adapter: categorical ids -> the package's ``CategoricalEmbeddings`` (one table per feature), flattened and
concatenated after the dense features -> ``MLP(d_in, d_out=num_outputs)``; ``[batch, 1]`` is squeezed to
``[batch]``. Dropout is the only randomness and is off in eval mode.
"""

import torch
from rtdl_revisiting_models import MLP, CategoricalEmbeddings
from torch import nn


class RtdlMLP(nn.Module):
    def __init__(self, spec, n_blocks: int, d_block: int, dropout: float, d_cat_embedding: int) -> None:
        super().__init__()
        self.cat_embeddings = CategoricalEmbeddings(list(spec.cardinalities), d_cat_embedding)
        d_in = len(spec.dense_features) + len(spec.cardinalities) * d_cat_embedding
        self.mlp = MLP(d_in=d_in, d_out=spec.num_outputs, n_blocks=n_blocks, d_block=d_block, dropout=dropout)

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        x = torch.cat([dense, self.cat_embeddings(categorical).flatten(1)], dim=1)
        out = self.mlp(x)
        return out.squeeze(-1) if out.shape[-1] == 1 else out


def build(spec, n_blocks: int = 2, d_block: int = 64, dropout: float = 0.1, d_cat_embedding: int = 8) -> nn.Module:
    return RtdlMLP(spec, n_blocks, d_block, dropout, d_cat_embedding)
