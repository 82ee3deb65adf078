"""MLP-LR from rtdl_num_embeddings==0.0.12 (Gorishniy et al., "On Embeddings for Numerical Features in
Tabular Deep Learning", NeurIPS 2022, Section 3.4): ``rtdl_num_embeddings.LinearReLUEmbeddings`` (per-feature
Linear -> ReLU) before ``rtdl_revisiting_models.MLP`` (0.0.2), as the package's README builds MLP-LR.

Adapter: dense -> ``LinearReLUEmbeddings`` ``[batch, n_dense, d_embedding]``, categorical ids ->
``rtdl_revisiting_models.CategoricalEmbeddings``; both flattened, concatenated -> ``MLP``; ``[batch, 1]`` is
squeezed to ``[batch]``. Dropout is the only randomness and is off in eval mode.
"""

import torch
from rtdl_num_embeddings import LinearReLUEmbeddings
from rtdl_revisiting_models import MLP, CategoricalEmbeddings
from torch import nn


class RtdlMLPLR(nn.Module):
    def __init__(
        self, spec, d_embedding: int, n_blocks: int, d_block: int, dropout: float, d_cat_embedding: int
    ) -> None:
        super().__init__()
        n_dense = len(spec.dense_features)
        self.num_embeddings = LinearReLUEmbeddings(n_dense, d_embedding)
        self.cat_embeddings = CategoricalEmbeddings(list(spec.cardinalities), d_cat_embedding)
        d_in = n_dense * d_embedding + len(spec.cardinalities) * d_cat_embedding
        self.mlp = MLP(d_in=d_in, d_out=spec.num_outputs, n_blocks=n_blocks, d_block=d_block, dropout=dropout)

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.num_embeddings(dense).flatten(1), self.cat_embeddings(categorical).flatten(1)], dim=1)
        out = self.mlp(x)
        return out.squeeze(-1) if out.shape[-1] == 1 else out


def build(
    spec, d_embedding: int = 32, n_blocks: int = 2, d_block: int = 64, dropout: float = 0.1, d_cat_embedding: int = 8
) -> nn.Module:
    return RtdlMLPLR(spec, d_embedding, n_blocks, d_block, dropout, d_cat_embedding)
