"""A Transformer text classifier (BERT-style encoder, Devlin et al. 2019, small and trained from scratch) that
also reads the tabular features.

Per token sequence: token + learned position embeddings, a learnable [CLS] token prepended, torch's own
``nn.TransformerEncoder`` (pre-norm, GELU, a final LayerNorm) with ``src_key_padding_mask = ids == padding_id``.
[CLS] is never masked, so every query row, an empty text's included, attends to at least one key (measured: with
[CLS] masked too, an empty text's attention softmax is NaN in torch's eval fast path and in onnxruntime). The
layers' attention is :class:`SelfAttention`, torch's own with the value passed as a view, which the legacy exporter
keeps dynamic in the length (see there).

The sequence's features are the [CLS] output (``pooling="cls"``, default) or the mean of the real tokens' outputs
(``"mean"``; zeros for an empty text); they are concatenated with the tabular features (one embedding per
categorical feature, as mlp) and an MLP head gives the task's scores.

Padded positions never reach [CLS] nor the mean (their keys are masked, their outputs are not pooled), so a row's
output does not depend on how far its batch is padded.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from torchtfx.components.torch_trainer.modeling.spec import ModelSpec, SequenceInput
from torchtfx.components.torch_trainer.modeling.zoo.sequence_inputs import (
    ATTENTION_DROPOUT,
    SelfAttention,
    SequenceClassifier,
    TokenEmbedding,
    masked_mean,
    require_sequences,
)
from torchtfx.components.torch_trainer.modeling.zoo.sizes import check_sizes

Pooling = Literal["cls", "mean"]


class ClsEncoder(nn.Module):
    """Embeds a sequence with [CLS] in front, runs ``stack(x, keep) -> (h, aux_loss or None)`` over it and pools."""

    def __init__(self, sequence: SequenceInput, d_model: int, pooling: Pooling, stack: nn.Module) -> None:
        super().__init__()
        if pooling not in ("cls", "mean"):
            raise ValueError(f"pooling {pooling!r} is not 'cls' or 'mean'")
        # BERT's initialization: token, position and [CLS] vectors from N(0, 0.02).
        self.embedding = TokenEmbedding(sequence, d_model, positions=True, init=("normal", 0.02))
        self.cls = nn.Parameter(torch.randn(d_model) * 0.02)
        self.stack = stack
        self.pooling, self.width = pooling, d_model

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        x, mask = self.embedding(ids)
        batch, _, d = x.shape
        x = torch.cat([self.cls.expand(batch, 1, d), x], dim=1)
        keep = torch.cat([torch.ones_like(mask[:, :1]), mask], dim=1)  # [CLS] is always kept
        h, aux = self.stack(x, keep)
        pooled = h[:, 0] if self.pooling == "cls" else masked_mean(h[:, 1:], mask)
        return pooled, aux


class TorchEncoderStack(nn.Module):
    """torch's ``nn.TransformerEncoder``: pre-norm layers (GELU) and a final LayerNorm, padding keys masked."""

    def __init__(self, d_model: int, n_layers: int, n_heads: int, d_ffn: int, dropout: float) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(
            d_model, n_heads, d_ffn, dropout, activation="gelu", batch_first=True, norm_first=True
        )
        # exportable at any length (see SelfAttention)
        layer.self_attn = SelfAttention(d_model, n_heads, ATTENTION_DROPOUT, batch_first=True)
        # Pre-norm blocks leave the residual stream unnormalized: the final LayerNorm is part of the encoder.
        # No nested tensors: their fast path drops padded positions, which the export (fast paths off) keeps.
        self.encoder = nn.TransformerEncoder(layer, n_layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, None]:
        return self.encoder(x, src_key_padding_mask=~keep), None


def build(
    spec: ModelSpec,
    d_model: int = 64,
    n_layers: int = 2,
    n_heads: int = 4,
    d_ffn: int = 128,
    dropout: float = 0.1,
    pooling: Pooling = "cls",
    head_hidden: int = 64,
    max_embedding_dim: int = 16,
) -> SequenceClassifier:
    check_sizes(
        d_model=d_model,
        n_layers=n_layers,
        n_heads=n_heads,
        d_ffn=d_ffn,
        head_hidden=head_hidden,
        max_embedding_dim=max_embedding_dim,
    )
    require_sequences(spec, "text_transformer")
    encoders = [
        ClsEncoder(s, d_model, pooling, TorchEncoderStack(d_model, n_layers, n_heads, d_ffn, dropout))
        for s in spec.sequences
    ]
    return SequenceClassifier(spec, encoders, head_hidden, dropout, max_embedding_dim)
