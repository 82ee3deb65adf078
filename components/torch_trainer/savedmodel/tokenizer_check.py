"""Hugging Face's own path against the served graph's tokenizer: for every eval row, the ids ``tokenizers`` gives
the raw text with the checkpoint's ``tokenizer.json`` must be the ids the serving signature's transform gives.

With the parity gate (PyTorch on those ids against the SavedModel on the raw tf.Examples), this proves that the
served model answers what the researcher's own code (``tokenizers`` + the torch model) would, on every eval row.
A text whose ids differ stops the run before the Evaluator, naming the row and both id lists.

Not covered by ids: a literal ``[PAD]`` in a text is id 0 in both, and the models mask id 0 (the mask is
``ids != padding id``) where ``tokenizers``' attention mask keeps it.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import tensorflow as tf

from torchtfx.components.stage_failure import StageFailure
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout
from torchtfx.data.config.dataset import TRANSFORMED_SUFFIX
from torchtfx.data.pretrained.checkpoint import TOKENIZER_FILE, resolve_checkpoint

logger = logging.getLogger(__name__)


class TokenizerParityError(StageFailure):
    """The served graph's tokenizer gave other ids than the checkpoint's own on a text."""


@dataclasses.dataclass
class _Text:
    name: str  # the transformed feature
    raw: str  # the raw column
    tokenizer: object  # tokenizers.Tokenizer, truncating and padding to max_length
    checked: int = 0


class PretrainedTokenizers:
    """The checkpoint tokenizers of a layout's pretrained text features (none: :meth:`compare` does nothing)."""

    def __init__(self, layout: FeatureLayout) -> None:
        self.texts: list[_Text] = []
        spec = layout.model_spec()
        for sequence in spec.sequences:
            if sequence.checkpoint is None:
                continue
            import tokenizers

            tokenizer = tokenizers.Tokenizer.from_file(str(resolve_checkpoint(sequence.checkpoint) / TOKENIZER_FILE))
            tokenizer.enable_truncation(sequence.max_length)
            tokenizer.enable_padding(pad_id=sequence.padding_id, length=sequence.max_length)
            raw = sequence.name.removesuffix(TRANSFORMED_SUFFIX)
            self.texts.append(_Text(sequence.name, raw, tokenizer))

    def compare(self, examples: tf.Tensor, transformed: dict[str, np.ndarray]) -> None:
        """Raise :class:`TokenizerParityError` where ``transformed`` holds other ids than ``tokenizers`` gives."""
        if not self.texts:
            return
        spec = {t.raw: tf.io.VarLenFeature(tf.string) for t in self.texts}
        parsed = tf.io.parse_example(examples, spec)
        for text in self.texts:
            values = tf.sparse.to_dense(parsed[text.raw], default_value=b"").numpy()
            raw = [row[0].decode("utf-8", "replace") if row.size else "" for row in values]
            want = np.array([encoding.ids for encoding in text.tokenizer.encode_batch(raw)], np.int64)
            got = transformed[text.name]
            differ = np.flatnonzero((want != got).any(axis=1))
            if differ.size:
                row = int(differ[0])
                raise TokenizerParityError(
                    f"the served graph tokenized {differ.size} of {len(raw)} texts of {text.raw!r} differently from "
                    f"the checkpoint's own tokenizer (tokenizers), e.g. {raw[row][:200]!r}: served ids "
                    f"{got[row].tolist()}, tokenizers' {want[row].tolist()}; the model was not handed to the "
                    "Evaluator. This is a torchtfx bug: report it with that text"
                )
            text.checked += len(raw)

    def describe(self) -> str:
        return ", ".join(f"{t.raw}: {t.checked} texts id for id" for t in self.texts)
