"""A pretrained Hugging Face encoder (BERT, MiniLM, DistilBERT, ...), fine-tuned with a task head, that also reads
the tabular features.

Each text feature with ``tokenizer: pretrained`` (data/config/text.py) carries its checkpoint in the spec
(``SequenceInput.checkpoint``: a folder or ``package:<module>/<folder>``, resolved again in each process that builds
the model: data/pretrained/checkpoint.py). Its encoder is ``transformers.AutoModel.from_pretrained`` of that folder,
local files only (``HF_HUB_OFFLINE=1`` is set unless the environment says otherwise): nothing is downloaded.

``forward(ids)``: the attention mask is ``ids != padding_id`` (the tokenizer's own padding id), token type ids are
zeros (one text per feature), and the last hidden state is pooled as

- ``"cls"``: the first position ([CLS]), as BERT's classifiers do;
- ``"mean"``: the mean over the real tokens, [CLS] and [SEP] included, as sentence-transformers' mean pooling;
- ``"auto"`` (default): what the checkpoint says: ``"mean"`` where its sentence-transformers pooling config
  (``modules.json``'s Pooling module, else ``1_Pooling/config.json``) sets ``pooling_mode_mean_tokens``,
  ``"cls"`` where there is none or it sets ``pooling_mode_cls_token``; other modes are refused by name.

The pooled features join the tabular ones and the zoo's MLP head (:class:`SequenceClassifier`), so binary,
multiclass and regression come with it. ``freeze_embeddings`` and ``freeze_layers`` (the first N blocks of a
BERT-like ``encoder.layer``) stop their gradients; ``gradient_checkpointing`` recomputes the blocks' activations in
the backward pass (``gradient_checkpointing_enable``, non-reentrant) instead of storing them.

The checkpoint's own pooler (BERT's ``pooler``: a dense layer over [CLS] trained for next-sentence prediction) is
dropped: its output is not used, and under DDP its parameters would get no gradient.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from torchtfx.components.torch_trainer.modeling.spec import ModelSpec, SequenceInput
from torchtfx.components.torch_trainer.modeling.zoo.sequence_inputs import (
    SequenceClassifier,
    masked_mean,
    require_sequences,
)
from torchtfx.components.torch_trainer.modeling.zoo.sizes import check_sizes
from torchtfx.data.pretrained.checkpoint import resolve_checkpoint

NAME = "hf_sequence_classifier"
Pooling = Literal["auto", "cls", "mean"]
POOLINGS = ("auto", "cls", "mean")
POOLING_DIR = "1_Pooling"  # where sentence-transformers saves its Pooling module when modules.json does not say
_ST_POOLING = "sentence_transformers.models.Pooling"


def _transformers() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # read when huggingface_hub is first imported
    try:
        import transformers
    except ImportError:
        raise ValueError(
            f"{NAME} loads Hugging Face checkpoints with the transformers package, which is not installed here; "
            "pip install transformers (in the Trainer's image too)"
        ) from None
    return transformers


def _pooling_config(folder: Path) -> Path | None:
    """The sentence-transformers pooling config inside checkpoint ``folder``, if it has one."""
    places = [POOLING_DIR]
    modules = folder / "modules.json"
    if modules.is_file():
        listed = json.loads(modules.read_text(encoding="utf-8"))
        places = [m.get("path", "") for m in listed if m.get("type") == _ST_POOLING] or places
    for place in places:
        config = (folder / place / "config.json").resolve()
        if config.is_relative_to(folder.resolve()) and config.is_file():
            return config
    return None


def checkpoint_pooling(folder: Path) -> str:
    """How checkpoint ``folder`` pools: "mean" or "cls" (module docstring)."""
    config = _pooling_config(Path(folder))
    if config is None:
        return "cls"
    modes = sorted(k.removeprefix("pooling_mode_") for k, v in json.loads(config.read_text()).items() if v is True)
    if modes in (["mean_tokens"], ["cls_token"]):
        return "mean" if modes == ["mean_tokens"] else "cls"
    raise ValueError(
        f"checkpoint {folder} pools by {' + '.join(modes) or 'nothing'} ({config}); {NAME} pools by cls or mean: "
        "set the hparam pooling: cls or pooling: mean"
    )


class PretrainedEncoder(nn.Module):
    """``ids [batch, length]`` through a Hugging Face encoder, pooled: ``(features [batch, hidden_size], None)``."""

    def __init__(self, sequence: SequenceInput, model: nn.Module, pooling: str) -> None:
        super().__init__()
        self.model, self.pooling = model, pooling
        self.padding_id, self.max_length, self.name = sequence.padding_id, sequence.max_length, sequence.name
        self.width = int(model.config.hidden_size)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, None]:
        if not (torch.jit.is_tracing() or torch.onnx.is_in_onnx_export()) and ids.shape[1] > self.max_length:
            raise ValueError(
                f"token sequence {self.name!r} of length {ids.shape[1]} is longer than its max_length "
                f"{self.max_length}; truncate it in the transform (the text feature's max_length)"
            )
        mask = ids != self.padding_id
        # An all-padding row (the model check sends one; the tokenizer always writes [CLS] and [SEP]) stays finite:
        # measured with transformers 5.20.2, sdpa and eager attention alike.
        hidden = self.model(
            input_ids=ids, attention_mask=mask.to(torch.int64), token_type_ids=torch.zeros_like(ids)
        ).last_hidden_state
        return (hidden[:, 0] if self.pooling == "cls" else masked_mean(hidden, mask)), None


def _freeze(model: nn.Module, embeddings: bool, layers: int) -> None:
    """Stop the gradients of the embeddings and the first ``layers`` blocks of a BERT-like model."""
    blocks = getattr(getattr(model, "encoder", None), "layer", None)
    if (embeddings and not hasattr(model, "embeddings")) or (layers and not isinstance(blocks, nn.ModuleList)):
        raise ValueError(
            f"freeze_embeddings and freeze_layers need a BERT-like model (embeddings, encoder.layer); "
            f"{type(model).__name__} has another layout: set freeze_embeddings: false and freeze_layers: 0"
        )
    if layers > (len(blocks) if blocks is not None else 0):
        raise ValueError(
            f"hparam freeze_layers={layers}: the checkpoint has {len(blocks)} layers; freeze at most {len(blocks)}"
        )
    frozen = ([model.embeddings] if embeddings else []) + (list(blocks[:layers]) if layers else [])
    for module in frozen:
        module.requires_grad_(False)


def load_encoder(sequence: SequenceInput, pooling: str = "auto") -> tuple[nn.Module, str]:
    """The pretrained model of ``sequence``'s checkpoint (its pooler dropped) and the pooling to use."""
    if sequence.checkpoint is None:
        raise ValueError(
            f"{NAME} needs a text feature with tokenizer: pretrained and a checkpoint; {sequence.name!r} is "
            "tokenized from scratch (words or char_ngrams): set tokenizer: pretrained and checkpoint: <folder>, "
            "or pick text_transformer"
        )
    folder = resolve_checkpoint(sequence.checkpoint)
    transformers = _transformers()
    model = transformers.AutoModel.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    if getattr(model, "pooler", None) is not None:
        model.pooler = None
    vocab = int(model.config.vocab_size)
    if sequence.vocab_size > vocab:
        raise ValueError(
            f"checkpoint {sequence.checkpoint!r}: its tokenizer has {sequence.vocab_size} ids but the model's "
            f"embedding only {vocab}; save the tokenizer and the model of one checkpoint together"
        )
    return model, checkpoint_pooling(folder) if pooling == "auto" else pooling


def build(
    spec: ModelSpec,
    pooling: Pooling = "auto",
    head_hidden: int = 64,
    dropout: float = 0.1,
    freeze_embeddings: bool = False,
    freeze_layers: int = 0,
    gradient_checkpointing: bool = False,
    max_embedding_dim: int = 16,
) -> SequenceClassifier:
    check_sizes(head_hidden=head_hidden, max_embedding_dim=max_embedding_dim)
    require_sequences(spec, NAME)
    if pooling not in POOLINGS:
        raise ValueError(f"hparam pooling={pooling!r} is not one of {', '.join(POOLINGS)}")
    if isinstance(freeze_layers, bool) or not isinstance(freeze_layers, int) or freeze_layers < 0:
        raise ValueError(f"hparam freeze_layers={freeze_layers!r}: a whole number of layers >= 0")
    encoders = []
    for sequence in spec.sequences:
        model, pooled = load_encoder(sequence, pooling)
        _freeze(model, freeze_embeddings, freeze_layers)
        if gradient_checkpointing:
            model.gradient_checkpointing_enable()
        encoders.append(PretrainedEncoder(sequence, model, pooled))
    return SequenceClassifier(spec, encoders, head_hidden, dropout, max_embedding_dim)
