"""The input layer mlp, resnet and dcn share: one embedding per categorical feature, concatenated with the
dense features into one 2-D tensor."""

from __future__ import annotations

import torch
from torch import nn

from torchtfx.components.torch_trainer.modeling.spec import ModelSpec, embedding_dims


def embedding_tables(spec: ModelSpec, max_embedding_dim: int) -> tuple[nn.ModuleList, int]:
    """One ``nn.Embedding`` per categorical feature, and the width of :func:`embed_and_concat`'s output."""
    dims = embedding_dims(spec.cardinalities, max_embedding_dim)
    tables = nn.ModuleList(nn.Embedding(card, dim) for card, dim in zip(spec.cardinalities, dims, strict=True))
    return tables, len(spec.dense_features) + sum(dims)


def embed_and_concat(tables: nn.ModuleList, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
    """``[dense, emb_0(categorical[:, 0]), ...]`` concatenated along the features."""
    parts = [dense] + [table(categorical[:, i]) for i, table in enumerate(tables)]
    if not tables:
        # A zero-width input still goes into the concatenation: an unused input would be dropped from the
        # exported graph, whose consumers always feed both (dense, categorical).
        parts.append(categorical.to(dense.dtype))
    return torch.cat(parts, dim=1)
