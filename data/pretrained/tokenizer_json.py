"""What a checkpoint's ``tokenizer.json`` (the ``tokenizers`` library's format) says, and whether torchtfx can run
it in core TensorFlow ops inside the Transform graph and the serving signature.

Supported: the WordPiece family (BERT, DistilBERT, MiniLM, ELECTRA, ...): a ``WordPiece`` model, a
``BertNormalizer`` (or none), a ``BertPreTokenizer`` and a ``[CLS] $A [SEP]`` post-processor (``TemplateProcessing``
or ``BertProcessing``). Anything else, byte-level BPE (RoBERTa, GPT-2) and Unigram (T5, XLM-R) among them, is
refused by name when the run starts (:func:`read_tokenizer`), before any stage runs.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from torchtfx.data.pretrained.checkpoint import TOKENIZER_FILE, CheckpointError

WORDPIECE = "WordPiece"
PAD_ID = 0
_NORMALIZERS = ("BertNormalizer", None)
_PRE_TOKENIZERS = ("BertPreTokenizer",)
_KNOWN_KINDS = {
    "BPE": "BPE (byte-level BPE as in RoBERTa and GPT-2, or BPE as in CLIP)",
    "Unigram": "Unigram (SentencePiece, as in T5, ALBERT and XLM-RoBERTa)",
    "WordLevel": "WordLevel",
}


class UnsupportedTokenizer(CheckpointError):
    """The checkpoint's tokenizer is one torchtfx cannot run in core TensorFlow ops."""


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
    """A WordPiece tokenizer, as the TF graph needs it."""

    path: Path  # the tokenizer.json
    vocab: tuple[str, ...]  # by id
    unk_id: int
    cls_id: int
    sep_id: int
    pad_id: int
    continuing_prefix: str
    max_input_chars_per_word: int
    added_tokens: tuple[tuple[str, int], ...]  # (content, id): matched in the raw text before normalization

    @property
    def vocab_size(self) -> int:
        """Ids the model's embedding must hold: the vocabulary and the added tokens."""
        return max(len(self.vocab), *(i + 1 for _, i in self.added_tokens))


def _refuse(path: Path, what: str) -> UnsupportedTokenizer:
    return UnsupportedTokenizer(
        f"{path}: {what}; torchtfx runs WordPiece tokenizers (BERT, DistilBERT, MiniLM: a WordPiece model, a "
        "BertNormalizer and a BertPreTokenizer) inside the serving graph in core TensorFlow ops. Pick a checkpoint "
        "with a WordPiece tokenizer, or the from-scratch tokenizers (tokenizer: words or char_ngrams)"
    )


def _type(part: dict[str, Any] | None) -> str | None:
    return None if part is None else part.get("type")


def _special_ids(path: Path, raw: dict[str, Any], vocab: dict[str, int]) -> tuple[int, int]:
    post = raw.get("post_processor")
    kind = _type(post)
    if kind == "BertProcessing":
        return int(post["cls"][1]), int(post["sep"][1])
    if kind == "TemplateProcessing":
        single = post["single"]
        names = [next(iter(p)) for p in single]
        if names == ["SpecialToken", "Sequence", "SpecialToken"]:
            first, last = single[0]["SpecialToken"]["id"], single[2]["SpecialToken"]["id"]
            ids = post["special_tokens"]
            return int(ids[first]["ids"][0]), int(ids[last]["ids"][0])
    raise _refuse(path, f"its post-processor ({kind}) does not wrap a text as [CLS] text [SEP]")


def _parse(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path} cannot be read as JSON ({err}); save the tokenizer again") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("model"), dict):
        raise CheckpointError(f"{path} is not a tokenizers file (no 'model'); save it with save_pretrained")
    return raw


def _check_pipeline(path: Path, raw: dict[str, Any]) -> dict[str, Any]:
    model = raw["model"]
    kind = model.get("type")
    if kind != WORDPIECE:
        raise _refuse(path, f"its model is {_KNOWN_KINDS.get(kind, kind)}")
    if _type(raw.get("normalizer")) not in _NORMALIZERS:
        raise _refuse(path, f"its normalizer is {_type(raw.get('normalizer'))}, not BertNormalizer")
    if _type(raw.get("pre_tokenizer")) not in _PRE_TOKENIZERS:
        raise _refuse(path, f"its pre-tokenizer is {_type(raw.get('pre_tokenizer'))}, not BertPreTokenizer")
    return model


def _added(path: Path, raw: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    added = []
    for token in raw.get("added_tokens") or ():
        flags = [flag for flag in ("single_word", "lstrip", "rstrip", "normalized") if token.get(flag)]
        if flags:
            raise _refuse(path, f"its added token {token['content']!r} sets {', '.join(flags)}")
        added.append((str(token["content"]), int(token["id"])))
    return tuple(added)


def read_tokenizer(folder: Path) -> TokenizerSpec:
    """The WordPiece tokenizer of checkpoint ``folder``; :class:`UnsupportedTokenizer` for any other."""
    path = Path(folder) / TOKENIZER_FILE
    raw = _parse(path)
    model = _check_pipeline(path, raw)
    vocab_map: dict[str, int] = model["vocab"]
    vocab = [""] * (max(vocab_map.values()) + 1)
    for token, index in vocab_map.items():
        vocab[index] = token
    added = _added(path, raw)
    ids = {**vocab_map, **dict(added)}
    unk = model.get("unk_token", "[UNK]")
    padding = raw.get("padding") or {}
    pad = padding.get("pad_token", "[PAD]")
    if unk not in ids or pad not in ids:
        raise CheckpointError(f"{path}: its unknown token {unk!r} or padding token {pad!r} has no id; save it again")
    if ids[pad] != PAD_ID:
        # Transform, the Trainer's batches and the export checks pad token ids with 0 (data/config/text.py), as
        # BERT's own vocabulary does.
        raise _refuse(path, f"its padding token {pad!r} has id {ids[pad]}, and torchtfx pads with id {PAD_ID}")
    cls_id, sep_id = _special_ids(path, raw, ids)
    return TokenizerSpec(
        path=path,
        vocab=tuple(vocab),
        unk_id=ids[unk],
        cls_id=cls_id,
        sep_id=sep_id,
        pad_id=ids[pad],
        continuing_prefix=model.get("continuing_subword_prefix", "##"),
        max_input_chars_per_word=int(model.get("max_input_chars_per_word", 100)),
        added_tokens=added,
    )
