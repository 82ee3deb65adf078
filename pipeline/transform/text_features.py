"""Text features in the Transform graph: normalization, tokens, vocabulary ids and a length bucket per text.

Core TensorFlow ops only: tensorflow-text is not installed, and TF Serving must run the graph as it is.

- Normalization: Unicode NFKC, then lower case (ICU's full case mapping, as Python's ``str.lower``), then HTML line
  breaks (``<br />``: 4.1 per IMDB review) as spaces. NFKC is two lookups in one table that :func:`nfkc_table`
  builds from Python's ``unicodedata`` when the graph is built: each character is replaced by its NFKC (``ﬁ`` ->
  ``fi``, fullwidth A (U+FF21) -> ``A``, ``²`` -> ``2``), then each cluster (a character and the combining marks
  after it) by its composed form (``e`` + U+0301 -> ``é``; halfwidth ``ｶﾞ`` becomes ``カ`` + U+3099 in the first
  step and ``ガ`` in the second; clusters alone, in one step, left it and ``ﬁ`` + U+0301 as they were). Texts of
  ASCII characters only, which NFKC leaves as they are (92% of the movie reviews), skip both steps. Not covered:
  marks in a non-canonical order (Python reorders them) and Hangul jamo sequences (composed syllables, the way
  Korean is typed, are left as they are, as NFKC leaves them).
- Tokens (``words``): runs of letters, digits and marks are words; any other character that is not a space or a
  control character (punctuation, emoji, symbols) is a token of its own, with the marks that follow it. Format
  characters (zero-width joiners, soft hyphens) and variation selectors are dropped first, so ``❤️`` is ``❤`` and a
  ZWJ emoji sequence is its emoji, one token each. ``char_ngrams``: each such token as ``<token>``, cut into
  character n-grams (a shorter token is one n-gram).
- Ids: ``data/config/text.py``: padding 0 after the last token, unknown 1, the vocabulary from 2, then the OOV
  buckets. The vocabulary counts the tokens the model reads (the first ``max_length`` of each text).
- ``<key>_length_bucket``: the token count before truncation, as a string that sorts (:func:`length_buckets`).
- ``tokenizer: pretrained``: the checkpoint's own WordPiece tokenizer instead of all of the above, id for id as
  ``tokenizers`` gives them (:mod:`.wordpiece`); no vocabulary is counted.

Measured (2 cores): the table has 5,748 entries (36 kB of UTF-8 keys and values; 59 kB of constants in the
saved transform graph of the movie reviews, 246 kB in all); building it scans every codepoint, 0.3 s once per
process. Tracing one text feature takes 0.2 s (TFT traces the preprocessing_fn 5 times per analysis). On 2,000
IMDB reviews (2.55 M characters, 197 reviews with non-ASCII characters): NFKC through the table 1.1 to 1.8 s
for all of them, 0.14 s with the ASCII-only ones skipped; normalization and words 0.55 to 0.9 s (271 tokens a
review), char_ngrams 1.0 to 1.4 s (1,030 3-grams a review). Transform's analysis of all 33,530 reviews: 25 s.
"""

from __future__ import annotations

import functools
import sys
import unicodedata

import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_transform import schema_inference

from torchtfx.data.config.dataset import transformed_name
from torchtfx.data.config.text import (
    CHAR_NGRAMS,
    PADDING_ID,
    PRETRAINED,
    RESERVED_IDS,
    TextFeature,
    length_bucket_key,
    pretrained_tokenizer,
    text_vocabulary_name,
)
from torchtfx.pipeline.transform.tracked import tracked
from torchtfx.pipeline.transform.wordpiece import wordpiece_ids

_ASCII = r"[\x00-\x7f]*"
_MARK = r"\pM"
_LINE_BREAK = r"<br\s*/?>"
_DROPPED = r"[\p{Cf}\x{FE00}-\x{FE0F}]"  # format characters (ZWJ, soft hyphen), variation selectors
_SYMBOL = r"([^\pL\pN\pM\pZ\p{Cc}]\pM*)"  # not a word, a space or a control character: a token of its own
_SPACES = r"[\pZ\p{Cc}]+"
_TABLE_NAME = "torchtfx_nfkc"
_SHORTEST_BUCKET = 8  # token counts 1..8, then doubling: 9..16, 17..32, ...


@functools.lru_cache(maxsize=1)
def nfkc_table() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(keys, values): every character whose NFKC differs, and every canonical decomposition of a character into
    a base and combining marks, each to its NFKC (see the module's docstring)."""
    table: dict[str, str] = {}
    for code in range(sys.maxunicode + 1):
        if 0xD800 <= code <= 0xDFFF:  # surrogates: not characters, never in UTF-8
            continue
        char = chr(code)
        nfkc = unicodedata.normalize("NFKC", char)
        if nfkc != char:
            table[char] = nfkc
        nfd = unicodedata.normalize("NFD", char)
        # Only a base followed by marks is ever looked up (clusters); Hangul syllables decompose into letters.
        if len(nfd) > 1 and nfd != nfkc and all(unicodedata.category(c).startswith("M") for c in nfd[1:]):
            table.setdefault(nfd, nfkc)
    return tuple(table), tuple(table.values())


def _new_table() -> tf.lookup.StaticHashTable:
    keys, values = nfkc_table()
    # No value is empty: "" stands for "not in the table".
    initializer = tf.lookup.KeyValueTensorInitializer(tf.constant(keys), tf.constant(values))
    return tf.lookup.StaticHashTable(initializer, default_value="")


def _table() -> tf.lookup.StaticHashTable:
    """The NFKC table, made once per graph: inside TFT's traced function (TF2, the default), lifted out of it and
    tracked in the SavedModel, or the table would be filled again at every call (every batch, every request)."""
    return tracked(_new_table, _TABLE_NAME)


def _lookup(table: tf.lookup.StaticHashTable, strings: tf.Tensor) -> tf.Tensor:
    found = table.lookup(strings)
    return tf.where(tf.equal(found, ""), strings, found)


def _per_character(texts: tf.Tensor, table: tf.lookup.StaticHashTable) -> tf.Tensor:
    chars = tf.strings.unicode_split(texts, "UTF-8")  # invalid UTF-8 bytes become U+FFFD
    return tf.strings.reduce_join(tf.ragged.map_flat_values(lambda c: _lookup(table, c), chars), axis=-1)


def _per_cluster(texts: tf.Tensor, table: tf.lookup.StaticHashTable) -> tf.Tensor:
    """Each character with the combining marks after it, looked up as one string."""
    chars = tf.strings.unicode_split(texts, "UTF-8")
    flat, rows = chars.flat_values, chars.value_rowids()
    position = tf.range(tf.size(flat, out_type=tf.int64)) - tf.gather(chars.row_splits, rows)
    # A mark at the start of a text has no base: it starts a cluster of its own.
    starts = tf.logical_or(tf.logical_not(tf.strings.regex_full_match(flat, _MARK)), tf.equal(position, 0))
    starts = tf.cast(starts, tf.int64)
    cluster = tf.cumsum(starts) - 1
    joined = tf.strings.unsorted_segment_join(flat, cluster, num_segments=tf.reduce_sum(starts))
    per_text = tf.reduce_sum(chars.with_flat_values(starts), axis=1)
    clusters = tf.RaggedTensor.from_row_lengths(_lookup(table, joined), per_text)
    return tf.strings.reduce_join(clusters, axis=-1)


def nfkc(texts: tf.Tensor) -> tf.Tensor:
    """Unicode NFKC of string [batch] (module docstring)."""
    rows = tf.where(tf.logical_not(tf.strings.regex_full_match(texts, _ASCII)))[:, 0]
    table = _table()
    done = _per_cluster(_per_character(tf.gather(texts, rows), table), table)
    return tf.tensor_scatter_nd_update(texts, rows[:, None], done)


def normalize(texts: tf.Tensor) -> tf.Tensor:
    """NFKC, lower case, ``<br />`` as a space: string [batch]."""
    return tf.strings.regex_replace(tf.strings.lower(nfkc(texts), encoding="utf-8"), _LINE_BREAK, " ")


def words(texts: tf.Tensor) -> tf.RaggedTensor:
    """The word and symbol tokens of normalized texts: string [batch, (tokens)]."""
    texts = tf.strings.regex_replace(texts, _DROPPED, "")
    texts = tf.strings.regex_replace(texts, _SYMBOL, r" \1 ")
    return tf.strings.split(tf.strings.regex_replace(texts, _SPACES, " "))


def char_ngrams(tokens: tf.RaggedTensor, width: int) -> tf.RaggedTensor:
    """Each token as ``<token>`` cut into character n-grams: string [batch, (n-grams)]."""
    wrapped = tf.ragged.map_flat_values(lambda t: tf.strings.join(["<", t, ">"]), tokens)
    chars = tf.strings.unicode_split(wrapped, "UTF-8")
    grams = tf.strings.ngrams(chars, width, separator="", preserve_short_sequences=True)
    return grams.merge_dims(1, 2)


def tokens(texts: tf.Tensor, feature: TextFeature) -> tf.RaggedTensor:
    """Normalized texts' tokens by the feature's tokenizer."""
    found = words(normalize(texts))
    return char_ngrams(found, feature.width) if feature.tokenizer == CHAR_NGRAMS else found


def length_buckets(max_length: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """(upper bounds, labels): ``000``, ``001-008``, ``009-016``, ``017-032``, ... up to ``max_length``, then
    ``over <max_length> (truncated)``; zero-padded (3 digits at least) so that the labels sort by length."""
    digits = max(3, len(str(max_length)))
    uppers, labels, low, high = [0], ["0" * digits], 1, _SHORTEST_BUCKET
    while low <= max_length:
        high = min(high, max_length)
        uppers.append(high)
        labels.append(f"{low:0{digits}d}-{high:0{digits}d}")
        low, high = high + 1, high * 2
    return tuple(uppers), (*labels, f"over {max_length} (truncated)")


def length_bucket(counts: tf.Tensor, max_length: int) -> tf.Tensor:
    """Each token count's bucket label (:func:`length_buckets`): string [batch]."""
    uppers, labels = length_buckets(max_length)
    index = tf.searchsorted(tf.constant(uppers, tf.int64), counts, side="left")
    return tf.gather(tf.constant(labels), index)


def token_ids(found: tf.RaggedTensor, key: str, feature: TextFeature) -> tf.Tensor:
    """int64 [batch, max_length]: the first ``max_length`` tokens' ids (data/config/text.py), padded at the end."""
    kept = found[:, : feature.max_length]
    ids = tft.compute_and_apply_vocabulary(
        kept,
        top_k=feature.top_k,
        num_oov_buckets=feature.num_oov_buckets,
        default_value=-1,
        vocab_filename=text_vocabulary_name(key),
        name=f"text_vocabulary_{key}",
    )
    dense = (ids + RESERVED_IDS).to_tensor(default_value=PADDING_ID, shape=[None, feature.max_length])
    # The id range, as compute_and_apply_vocabulary records it for a categorical: num_buckets_for_transformed_feature
    # then gives the model's vocabulary size too.
    size = tf.cast(tft.experimental.get_vocabulary_size_by_name(text_vocabulary_name(key)), tf.int64)
    schema_inference.set_tensor_schema_override(
        dense, tf.constant(0, tf.int64), size + feature.num_oov_buckets + RESERVED_IDS - 1
    )
    return dense


def text_outputs(texts: tf.Tensor, key: str, feature: TextFeature) -> dict[str, tf.Tensor]:
    """``<key>_xf`` (token ids) and ``<key>_length_bucket`` of string [batch] ``texts``."""
    if texts.dtype != tf.string:
        raise ValueError(
            f"text feature {key!r} is {texts.dtype.name} in the curated schema; a text column needs type BYTES there"
        )
    with tf.compat.v1.name_scope(f"text_{key}"):
        if feature.tokenizer == PRETRAINED:
            return _pretrained_outputs(texts, key, feature)
        found = tokens(texts, feature)
        bucket = length_bucket(found.row_lengths(), feature.max_length)
        return {transformed_name(key): token_ids(found, key, feature), length_bucket_key(key): bucket}


def _pretrained_outputs(texts: tf.Tensor, key: str, feature: TextFeature) -> dict[str, tf.Tensor]:
    """The checkpoint's own WordPiece ids (:mod:`.wordpiece`), [CLS] and [SEP] counted in ``max_length``, and the
    bucket of the token count the checkpoint's tokenizer gives before truncation."""
    tokenizer = pretrained_tokenizer(feature)
    ids, counts = wordpiece_ids(texts, tokenizer, feature.max_length)
    schema_inference.set_tensor_schema_override(
        ids, tf.constant(0, tf.int64), tf.constant(tokenizer.vocab_size - 1, tf.int64)
    )
    return {transformed_name(key): ids, length_bucket_key(key): length_bucket(counts, feature.max_length)}
