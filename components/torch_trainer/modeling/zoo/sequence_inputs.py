"""What the text models share: token (+ position) embeddings with their padding mask, masked pooling, and the
classifier around one encoder per token sequence whose pooled features join the tabular ones before an MLP head.

A sequence is int64 ``[batch, length]`` ids, ``1 <= length <= max_length``, padded at the end with
``padding_id``; a row may be all padding (an empty text). Every encoder returns ``(features [batch, width],
aux_loss or None)``.
"""

from __future__ import annotations

import torch
from torch import nn

from torchtfx.components.torch_trainer.modeling.spec import ModelSpec, SequenceInput
from torchtfx.components.torch_trainer.modeling.zoo.inputs import embed_and_concat, embedding_tables


def require_sequences(spec: ModelSpec, model: str) -> None:
    if not spec.sequences:
        raise ValueError(
            f"{model} reads token sequences but the spec has none; add a `text:` feature to the dataset YAML, "
            "or pick a tabular model (mlp, resnet, dcn, ft_transformer)"
        )


def _tracing() -> bool:
    return torch.jit.is_tracing() or torch.onnx.is_in_onnx_export()


class TokenEmbedding(nn.Module):
    """``ids [batch, length]`` to ``(x [batch, length, d], mask [batch, length])``, ``mask = ids != padding_id``.

    Padding positions embed to exactly zero, whatever the table holds: ``x`` is multiplied by the mask (so neither
    a re-initialized padding row nor a position embedding reaches them); the padding row gets no gradient.
    ``init``: ``("normal", std)`` or ``("uniform", bound)`` for the token table, and the position table if any.
    """

    def __init__(
        self, sequence: SequenceInput, d: int, positions: bool, init: tuple[str, float] = ("normal", 0.02)
    ) -> None:
        super().__init__()
        self.max_length, self.padding_id = sequence.max_length, sequence.padding_id
        self.token = nn.Embedding(sequence.vocab_size, d, padding_idx=sequence.padding_id)
        self.position = nn.Embedding(sequence.max_length, d) if positions else None
        kind, scale = init
        for table in (self.token, self.position) if positions else (self.token,):
            if kind == "normal":
                nn.init.normal_(table.weight, std=scale)
            else:
                nn.init.uniform_(table.weight, -scale, scale)
        with torch.no_grad():
            self.token.weight[sequence.padding_id].zero_()

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not _tracing() and ids.shape[1] > self.max_length:
            raise ValueError(
                f"token sequence of length {ids.shape[1]} is longer than its max_length {self.max_length}; "
                "truncate it in the transform (the text feature's max_length) or build the model with the same one"
            )
        mask = ids != self.padding_id
        x = self.token(ids)
        if self.position is not None:
            # arange over the traced length: the legacy exporter writes Shape -> Gather -> Range, so the exported
            # graph keeps the length dynamic (a Python int here would be frozen at the trace's length).
            x = x + self.position(torch.arange(ids.shape[1], device=ids.device))
        return x * mask.unsqueeze(-1).to(x.dtype), mask


# No dropout on the attention weights (the models' ``dropout`` applies to the residual stream, feed-forward and
# head): measured on 2 CPU threads, a text_transformer training step at batch 256 x 128 tokens took 2.9 s with
# dropout 0.1 on the [batch, heads, length, length] weights (bernoulli_ alone 0.42 s, and the fused attention kernel
# is not used then) and 0.39 s without.
ATTENTION_DROPOUT = 0.0


class SelfAttention(nn.MultiheadAttention):
    """``nn.MultiheadAttention`` that exports with a dynamic sequence length when called as ``attn(x, x, x)``.

    Measured with torch 2.14.1's legacy exporter (opset 17): when query, key and value are one tensor, the packed
    in-projection path's ``k.view(k.shape[0], bsz * num_heads, head_dim)`` (torch/nn/functional.py, in
    ``multi_head_attention_forward``) is converted by ``_jit_pass_onnx`` into ``onnx::Constant`` holding the
    trace's length, so the graph fails at any other length (onnxruntime: Reshape ``.../self_attn/Reshape_4``,
    "Input shape:{2,1,64}, requested shape:{8,4,16}"). A value that is another tensor object (a view of the same
    data) takes the separate q/k/v projection path, same weights and result (three matmuls instead of one), whose
    shapes stay dynamic. The eval fast path of ``nn.TransformerEncoderLayer`` does not call this forward at all.
    """

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *args, **kwargs):
        if value is key:
            value = value.view_as(value)
        return super().forward(query, key, value, *args, **kwargs)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the unmasked positions of ``x [batch, length, d]``; zeros for a row with none."""
    weights = mask.unsqueeze(-1).to(x.dtype)
    return (x * weights).sum(1) / weights.sum(1).clamp(min=1.0)


def mlp_head(width: int, hidden: int, outputs: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, outputs))


class SequenceClassifier(nn.Module):
    """``forward(dense, categorical, *sequences)``: each sequence through its encoder, the pooled features
    concatenated with the tabular ones (one embedding per categorical feature, as mlp), an MLP head.

    Returns the scores, or ``(scores, aux_loss)`` in training when an encoder has an auxiliary loss.
    """

    def __init__(
        self, spec: ModelSpec, encoders: list[nn.Module], hidden: int, dropout: float, max_embedding_dim: int
    ) -> None:
        super().__init__()
        self.names = tuple(s.name for s in spec.sequences)
        self.embeddings, tabular_width = embedding_tables(spec, max_embedding_dim)
        self.encoders = nn.ModuleList(encoders)
        width = tabular_width + sum(e.width for e in encoders)
        self.head = mlp_head(width, hidden, spec.num_outputs, dropout)
        self.squeeze = spec.num_outputs == 1

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor, *sequences: torch.Tensor):
        if len(sequences) != len(self.encoders):
            raise TypeError(
                f"expected {len(self.encoders)} token sequence input(s) after dense and categorical "
                f"({', '.join(self.names)}), got {len(sequences)}; pass one int64 [batch, length] tensor per name"
            )
        parts, aux = [embed_and_concat(self.embeddings, dense, categorical)], []
        for encoder, ids in zip(self.encoders, sequences, strict=True):
            features, loss = encoder(ids)
            parts.append(features)
            if loss is not None:
                aux.append(loss)
        out = self.head(torch.cat(parts, dim=1))
        scores = out.squeeze(1) if self.squeeze else out
        if self.training and aux:
            return scores, torch.stack(aux).sum()
        return scores
