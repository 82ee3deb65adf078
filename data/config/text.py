"""The ``text:`` feature kind: a free-text column turned into a fixed-length row of token ids.

```yaml
features:
  text:
    review:                  # the raw CSV column
      max_length: 128        # tokens kept (the first ones), >= 1
      tokenizer: words       # words | char_ngrams
      ngram_width: 3         # char_ngrams only, 2..6 (3 when left out)
      top_k: 20000           # vocabulary size: the most frequent tokens of the analyzed (train) data
      num_oov_buckets: 100   # hashed buckets for other tokens; 0: they all get UNKNOWN_ID
```

Transform (pipeline/transform/text_features.py) writes ``<key>_xf``, int64 ``[batch, max_length]``: ``PADDING_ID``
after the last token, ``UNKNOWN_ID`` for a token outside the vocabulary when there are no OOV buckets, then the
vocabulary by frequency, then the OOV buckets: :func:`model_vocab_size` ids in all. It also writes
``<key>_length_bucket`` (:func:`length_bucket_key`), the token count as a string bucket that the Evaluator slices by.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic

from torchtfx.data.config.strict import ConfigError, StrictConfig

PADDING_ID = 0
UNKNOWN_ID = 1
RESERVED_IDS = 2  # vocabulary ids start here
WORDS = "words"
CHAR_NGRAMS = "char_ngrams"
TOKENIZERS = (WORDS, CHAR_NGRAMS)
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
            raise ValueError(f"got {value!r}, which is not a tokenizer; use {WORDS} or {CHAR_NGRAMS}")
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

    @property
    def width(self) -> int:
        """The character n-gram width (char_ngrams)."""
        return self.ngram_width or DEFAULT_NGRAM_WIDTH


def text_vocabulary_name(key: str) -> str:
    """The TFT ``vocab_filename`` of text feature ``key``'s tokens."""
    return key + VOCABULARY_SUFFIX


def length_bucket_key(key: str) -> str:
    """The transform output that slices text feature ``key`` by its token count."""
    return key + LENGTH_BUCKET_SUFFIX


def model_vocab_size(tft_output: Any, key: str, feature: TextFeature) -> int:
    """How many ids text feature ``key`` can take (an embedding's rows): the reserved ids, Transform's vocabulary
    (``tft_output``: a ``tft.TFTransformOutput``) and the OOV buckets. Transform records the same number as the
    feature's int domain (``num_buckets_for_transformed_feature``)."""
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
