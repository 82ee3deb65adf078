"""The requests of the ``serving_pretrained`` benchmark (tests/bench/pretrained_serving_bench.py): eval reviews cut
to an exact count of word pieces, and what a researcher's own serving code does with raw rows (``tokenizers``, a
dict per categorical feature) before onnxruntime or PyTorch eager runs the network."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np


def cut_to_tokens(text: str, tokenizer, length: int) -> str | None:
    """``text``'s beginning (``text`` repeated while shorter) that ``tokenizer`` reads as exactly ``length`` ids,
    the special tokens included; None where the cut after the ``length - 2``-th word piece reads otherwise (a word
    cut inside) or ``text`` has no tokens. ``tokenizer``: a ``tokenizers.Tokenizer`` without truncation."""
    body = length - 2  # [CLS] ... [SEP]
    pieces = tokenizer.encode(text, add_special_tokens=False)
    if not pieces.ids or body < 1:
        return None
    while len(pieces.ids) < body:
        text = f"{text} {text}"
        pieces = tokenizer.encode(text, add_special_tokens=False)
    cut = text[: pieces.offsets[body - 1][1]]
    return cut if len(tokenizer.encode(cut).ids) == length else None


def untruncated(tokenizer_file: Path):
    import tokenizers

    tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_file))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def cut_examples(raw: list[bytes], text_key: str, tokenizer, length: int, rows: int) -> list[bytes]:
    """``rows`` tf.Examples (cycled) of ``raw`` with ``text_key`` cut by :func:`cut_to_tokens`."""
    import tensorflow as tf

    cut = []
    for serialized in raw:
        example = tf.train.Example.FromString(serialized)
        values = example.features.feature[text_key].bytes_list.value
        text = cut_to_tokens(values[0].decode("utf-8"), tokenizer, length) if values else None
        if text is not None:
            example.features.feature[text_key].bytes_list.value[:] = [text.encode("utf-8")]
            cut.append(example.SerializeToString())
    if not cut:
        raise RuntimeError(f"no eval text reads as exactly {length} tokens after cutting; lower LENGTHS")
    return list(itertools.islice(itertools.cycle(cut), rows))


class HuggingFacePath:
    """What a researcher's own serving code does with a batch of raw rows: ``tokenizers`` on the texts (truncated
    at ``max_length``, padded to the batch's longest), each categorical feature's id from a dict, then the network's
    inputs in ``forward``'s order (dense, categorical, token ids)."""

    def __init__(self, tokenizer_file: Path, max_length: int, padding_id: int, vocabularies: list[dict]) -> None:
        import tokenizers

        self.tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.enable_truncation(max_length)
        self.tokenizer.enable_padding(pad_id=padding_id)
        self.vocabularies = vocabularies

    def inputs(self, texts: list[str], categorical: list[tuple[str, ...]]) -> tuple[np.ndarray, ...]:
        ids = np.array([encoding.ids for encoding in self.tokenizer.encode_batch(texts)], np.int64)
        ids_of = [[vocabulary[row[j]] for j, vocabulary in enumerate(self.vocabularies)] for row in categorical]
        return (
            np.zeros([len(texts), 0], np.float32),
            np.array(ids_of, np.int64).reshape(len(texts), len(self.vocabularies)),
            ids,
        )


def raw_rows(examples: list[bytes], text_key: str, categorical_keys: list[str]) -> tuple[list[str], list[tuple]]:
    """(each example's text, each example's categorical values as strings): the Hugging Face paths' request."""
    import tensorflow as tf

    texts, categorical = [], []
    for serialized in examples:
        feature = tf.train.Example.FromString(serialized).features.feature
        texts.append(_first_value(feature[text_key]))
        categorical.append(tuple(_first_value(feature[k]) for k in categorical_keys))
    return texts, categorical


def _first_value(feature) -> str:
    kind = feature.WhichOneof("kind")
    values = getattr(feature, kind).value if kind else []
    if not values:
        return ""
    return values[0].decode("utf-8") if isinstance(values[0], bytes) else str(values[0])


def vocabularies(saved, examples: list[bytes], layout, raw_keys: list[str]) -> list[dict]:
    """Per categorical input, raw value -> the id Transform gives it, read off Transform's own output on
    ``examples``."""
    import tensorflow as tf

    from torchtfx.components.shared.served_interface import EXAMPLES_INPUT, TRANSFORM_SIGNATURE
    from torchtfx.data.config.dataset import TRANSFORMED_SUFFIX

    transformed = saved.signatures[TRANSFORM_SIGNATURE](**{EXAMPLES_INPUT: tf.constant(examples)})
    _, categorical = raw_rows(examples, layout.sequences[0].removesuffix(TRANSFORMED_SUFFIX), raw_keys)
    found: list[dict] = [{} for _ in raw_keys]
    for j, name in enumerate(layout.embedded):
        for row, ids in zip(categorical, np.asarray(transformed[name]).reshape(len(examples), -1), strict=True):
            found[j][row[j]] = int(ids[0])
    return found
