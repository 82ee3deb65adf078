"""A checkpoint's WordPiece tokenizer in core TensorFlow ops: raw text to the ids ``tokenizers`` gives, id for id.

The steps, as ``tokenizers`` runs them (``tokenizer.json``, :mod:`torchtfx.data.pretrained.tokenizer_json`):

1. Added tokens (``[CLS]``, ``[SEP]``, ``[MASK]``, ...) found in the raw text become sentinel characters that
   survive the next step as words of their own (:mod:`.wordpiece_characters`).
2. Normalizer and pre-tokenizer, one function of each character: a table lookup per character, then the text is
   split at spaces into words.
3. Only the first ``max_length - 2`` words can reach the model (each gives at least one piece), so the rest are
   dropped before the model step.
4. WordPiece: a word of more than ``max_input_chars_per_word`` characters is ``[UNK]``; a word in the vocabulary
   is its id (one lookup: most words); the others are cut greedily, longest match first, ``##`` before every
   piece but the first, in a ``tf.while_loop`` over all of them at once; a word with a part no vocabulary entry
   matches is one ``[UNK]``.
5. ``[CLS]`` + the first ``max_length - 2`` pieces + ``[SEP]``, padded with the padding id to ``max_length``.

Core ops only (the official TF Serving image has no TF Text ops); the tables are made once per graph and tracked
in the SavedModel as the NFKC table is (:mod:`.text_features`).
"""

from __future__ import annotations

import re

import tensorflow as tf

from torchtfx.data.pretrained.tokenizer_json import TokenizerSpec
from torchtfx.pipeline.transform.tracked import tracked
from torchtfx.pipeline.transform.wordpiece_characters import (
    KIND_MAPPED,
    KIND_SAME,
    KIND_SPACE,
    KIND_WORD,
    SENTINEL_BASE,
    CharacterTable,
    character_table,
)

_NOT_FOUND = -1
_ORDER = 1024  # pieces of one word are ordered by word * _ORDER + piece; a word has at most 1,000 characters


def _sentinel(index: int) -> str:
    return chr(SENTINEL_BASE + index)


class WordPieceTables(tf.Module):
    """The vocabulary, the character kinds and the mapped characters of one tokenizer."""

    def __init__(self, spec: TokenizerSpec, table: CharacterTable) -> None:
        super().__init__(name="wordpiece_tables")
        keys = [t for t in spec.vocab if t] + [_sentinel(i) for i in range(len(spec.added_tokens))]
        values = [i for i, t in enumerate(spec.vocab) if t] + [i for _, i in spec.added_tokens]
        self.vocab = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(keys), tf.constant(values, tf.int64)), _NOT_FOUND
        )
        self.mapped = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(table.mapped), tf.int64), tf.constant(list(table.mapped.values()))
            ),
            "",
        )
        self.range_starts = tf.constant(table.range_starts, tf.int32)
        self.range_kinds = tf.constant(table.range_kinds, tf.int32)


def _tables(spec: TokenizerSpec) -> WordPieceTables:
    table = character_table(spec.path, len(spec.added_tokens))
    return tracked(lambda: WordPieceTables(spec, table), "wordpiece_tables")


def _mark_added_tokens(texts: tf.Tensor, spec: TokenizerSpec, table: CharacterTable) -> tf.Tensor:
    if not spec.added_tokens:
        return texts
    texts = tf.strings.regex_replace(
        texts, f"[\\x{{{SENTINEL_BASE:X}}}-\\x{{{SENTINEL_BASE + 0xFFFD:X}}}]", table.deleted
    )
    # One token at a time, longest first: the same as tokenizers' leftmost-longest match when no added token
    # overlaps another (BERT's five special tokens do not).
    ordered = sorted(enumerate(spec.added_tokens), key=lambda item: -len(item[1][0]))
    for index, (content, _) in ordered:
        texts = tf.strings.regex_replace(texts, re.escape(content), _sentinel(index))
    return texts


def _normalized(texts: tf.Tensor, tables: WordPieceTables) -> tf.Tensor:
    chars = tf.strings.unicode_split(texts, "UTF-8", errors="replace")
    codes = tf.strings.unicode_decode(texts, "UTF-8", errors="replace").flat_values
    kinds = tf.gather(tables.range_kinds, tf.searchsorted(tables.range_starts, codes, side="right") - 1)
    flat = chars.flat_values
    out = tf.where(tf.equal(kinds, KIND_SAME), flat, "")  # KIND_DELETE: ""
    out = tf.where(tf.equal(kinds, KIND_SPACE), " ", out)
    out = tf.where(tf.equal(kinds, KIND_WORD), tf.strings.join([" ", flat, " "]), out)
    out = tf.where(tf.equal(kinds, KIND_MAPPED), tables.mapped.lookup(tf.cast(codes, tf.int64)), out)
    return tf.strings.reduce_join(chars.with_flat_values(out), axis=-1)


def _words(texts: tf.Tensor, spec: TokenizerSpec, tables: WordPieceTables, table: CharacterTable) -> tf.RaggedTensor:
    split = tf.strings.split(_normalized(_mark_added_tokens(texts, spec, table), tables), sep=" ")
    return tf.ragged.boolean_mask(split, tf.not_equal(split, ""))


def _longest_pieces(words: tf.Tensor, starts: tf.Tensor, lengths: tf.Tensor, tables: WordPieceTables, spec, widest):
    """For each word from ``starts``: (characters of the longest vocabulary piece there, 0 if none; its id)."""
    widths = tf.range(1, widest + 1, dtype=tf.int32)
    shape = tf.stack([tf.size(words), widest])
    candidates = tf.strings.substr(
        tf.broadcast_to(words[:, None], shape),
        tf.broadcast_to(starts[:, None], shape),
        tf.broadcast_to(widths[None, :], shape),
        unit="UTF8_CHAR",
    )
    prefixed = tf.where(starts[:, None] > 0, tf.strings.join([spec.continuing_prefix, candidates]), candidates)
    ids = tables.vocab.lookup(prefixed)
    fits = tf.logical_and(tf.not_equal(ids, _NOT_FOUND), starts[:, None] + widths[None, :] <= lengths[:, None])
    best = tf.reduce_max(tf.where(fits, widths[None, :], 0), axis=1)
    return best, tf.gather(ids, tf.maximum(best - 1, 0), batch_dims=1)


def _greedy(words: tf.Tensor, lengths: tf.Tensor, tables: WordPieceTables, spec: TokenizerSpec, widest: int):
    """Greedy longest-match-first over every word at once: (failed [words], piece word, piece order, piece id)."""
    count = tf.size(words)
    empty = tf.zeros([0], tf.int32)

    def step(order, starts, failed, owner, orders, ids):
        active = tf.where(tf.logical_and(starts < lengths, tf.logical_not(failed)))[:, 0]
        at = tf.cast(active, tf.int32)
        best, piece = _longest_pieces(
            tf.gather(words, active), tf.gather(starts, active), tf.gather(lengths, active), tables, spec, widest
        )
        found = best > 0
        failed = tf.tensor_scatter_nd_update(failed, active[:, None], tf.logical_not(found))
        starts = tf.tensor_scatter_nd_add(starts, active[:, None], best)
        kept = tf.boolean_mask(at, found)
        owner = tf.concat([owner, kept], 0)
        orders = tf.concat([orders, tf.fill(tf.shape(kept), order)], 0)
        ids = tf.concat([ids, tf.cast(tf.boolean_mask(piece, found), tf.int32)], 0)
        return order + 1, starts, failed, owner, orders, ids

    def going(order, starts, failed, *_):
        return tf.reduce_any(tf.logical_and(starts < lengths, tf.logical_not(failed)))

    state = (tf.constant(0), tf.zeros([count], tf.int32), tf.zeros([count], tf.bool), empty, empty, empty)
    invariants = (tf.TensorShape([]), tf.TensorShape([None]), tf.TensorShape([None])) + (tf.TensorShape([None]),) * 3
    _, _, failed, owner, orders, ids = tf.while_loop(
        going, step, state, shape_invariants=invariants, maximum_iterations=spec.max_input_chars_per_word
    )
    return failed, owner, orders, ids


def _pieces(words: tf.RaggedTensor, spec: TokenizerSpec, tables: WordPieceTables, widest: int) -> tf.RaggedTensor:
    """Each text's WordPiece ids, in order: int32 [batch, (pieces)]."""
    flat = words.flat_values
    lengths = tf.strings.length(flat, unit="UTF8_CHAR")
    direct = tf.cast(tables.vocab.lookup(flat), tf.int32)
    too_long = lengths > spec.max_input_chars_per_word
    single = tf.where(too_long, spec.unk_id, direct)
    greedy = tf.where(tf.logical_and(tf.equal(direct, _NOT_FOUND), tf.logical_not(too_long)))[:, 0]
    failed, owner, orders, ids = _greedy(tf.gather(flat, greedy), tf.gather(lengths, greedy), tables, spec, widest)
    single = tf.tensor_scatter_nd_update(single, greedy[:, None], tf.where(failed, spec.unk_id, -2))
    whole = tf.where(tf.not_equal(single, -2))[:, 0]  # words of one piece: in the vocabulary, [UNK] or failed
    kept = tf.logical_not(tf.gather(failed, owner))
    word = tf.concat([tf.cast(whole, tf.int32), tf.gather(tf.cast(greedy, tf.int32), tf.boolean_mask(owner, kept))], 0)
    order = tf.concat([tf.zeros_like(tf.cast(whole, tf.int32)), tf.boolean_mask(orders, kept)], 0)
    piece = tf.concat([tf.gather(single, whole), tf.boolean_mask(ids, kept)], 0)
    sort = tf.argsort(tf.cast(word, tf.int64) * _ORDER + tf.cast(order, tf.int64), stable=True)
    rows = tf.gather(words.value_rowids(), tf.gather(word, sort))
    return tf.RaggedTensor.from_value_rowids(tf.gather(piece, sort), rows, nrows=words.nrows())


def widest_piece(spec: TokenizerSpec) -> int:
    """Characters in the longest vocabulary entry, its continuation prefix left out."""
    return max(len(token.removeprefix(spec.continuing_prefix)) for token in spec.vocab if token)


def wordpiece_ids(texts: tf.Tensor, spec: TokenizerSpec, max_length: int) -> tuple[tf.Tensor, tf.Tensor]:
    """(ids int64 [batch, max_length], tokens int64 [batch]) of string [batch] ``texts`` (module docstring):
    ``tokens`` counts [CLS], the pieces and [SEP] before truncation (at least max_length + 1 when truncated)."""
    tables = _tables(spec)
    table = character_table(spec.path, len(spec.added_tokens))
    words = _words(texts, spec, tables, table)
    body = max_length - 2
    pieces = _pieces(words[:, :body], spec, tables, widest_piece(spec))
    batch = tf.shape(texts)[0:1]
    ones = tf.ones(tf.concat([batch, [1]], 0), tf.int32)
    ids = tf.concat([ones * spec.cls_id, pieces[:, :body], ones * spec.sep_id], axis=1)
    dense = tf.cast(ids.to_tensor(default_value=spec.pad_id, shape=[None, max_length]), tf.int64)
    dropped = tf.maximum(words.row_lengths() - body, 0)
    tokens = pieces.row_lengths() + dropped + 2
    return dense, tf.cast(tokens, tf.int64)
