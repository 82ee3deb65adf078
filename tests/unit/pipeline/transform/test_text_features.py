"""Text features through the real preprocessing_fn: one analyze+transform with tft_beam (Beam DirectRunner) over a
small in-memory corpus, then the same raw values as serialized tf.Examples through the saved transform graph, as
the serving signature runs it. Normalization is checked against Python's unicodedata, codepoint by codepoint."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils

from torchtfx.components.torch_trainer.handoff.materialize import materialize, through_transform_graph
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.features import layout_from_transform
from torchtfx.data.config.dataset import DatasetConfig, LabelRule
from torchtfx.data.config.text import PADDING_ID, UNKNOWN_ID, TextFeature, model_vocab_size
from torchtfx.pipeline.transform import text_features
from torchtfx.pipeline.transform.preprocessing import transform

SCHEMA = """
feature { name: "review" type: BYTES value_count { max: 1 } }
feature { name: "title" type: BYTES value_count { max: 1 } }
feature { name: "stars" type: INT presence { min_fraction: 1.0 } shape { dim { size: 1 } } }
"""
REVIEW = TextFeature(max_length=12, top_k=60, num_oov_buckets=0)  # unknown tokens: UNKNOWN_ID
TITLE = TextFeature(max_length=24, tokenizer="char_ngrams", ngram_width=3, top_k=30, num_oov_buckets=4)
FULLWIDTH = {c: chr(ord(c) + 0xFEE0) for c in "GREATmovie"}  # U+FF27 ... (ASCII + 0xFEE0)
LONG = " ".join(f"w{i % 7}" for i in range(10_000))  # 10,000 words
# review -> what it must equal after normalization (None: only itself)
REVIEWS = {
    "Café crème brûlée, très bien!": None,
    "Cafe\u0301 cre\u0300me bru\u0302le\u0301e, tre\u0300s bien!": "Café crème brûlée, très bien!",  # decomposed
    "great movie": None,
    "GREAT movie".translate(str.maketrans(FULLWIDTH)): "great movie",  # fullwidth
    "ﬁne ﬁlm": None,
    "fine film": "ﬁne ﬁlm",  # ligatures
    "loved it 👍🏽 ❤️ 👨\u200d👩\u200d👧 !!": None,
    "loved it 👍🏽 ❤ 👨👩👧 !!": "loved it 👍🏽 ❤️ 👨\u200d👩\u200d👧 !!",  # variation selector and ZWJs dropped
    "good<br /><br />bad": "good bad",
    "good bad": None,
    "": None,
    " \t\n\u00a0\u3000 ": None,  # whitespace only
    LONG: None,
}
MISSING = None  # a row without a review value at all


def _example(review: str | None, title: str | None, stars: int) -> bytes:
    feature = {"stars": tf.train.Feature(int64_list=tf.train.Int64List(value=[stars]))}
    for name, text in (("review", review), ("title", title)):
        if text is not None:
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


class Run:
    """The raw rows, what Beam's analyze+transform wrote for them, and the saved transform graph."""

    def __init__(self, rows: list[tuple], beam_out: list[dict], out: tft.TFTransformOutput, schema, cfg):
        self.rows, self.beam_out, self.out, self.cfg = rows, beam_out, out, cfg
        self.spec = schema_utils.schema_as_feature_spec(schema).feature_spec

    def serve(self, rows: list[tuple]) -> dict[str, np.ndarray]:
        parsed = tf.io.parse_example(tf.constant([_example(*row) for row in rows]), self.spec)
        return {k: v.numpy() for k, v in self.out.transform_features_layer()(parsed).items()}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    root = tmp_path_factory.mktemp("text")
    (root / "schema.pbtxt").write_text(SCHEMA)
    schema = text_format.Parse(SCHEMA, schema_pb2.Schema())
    cfg = DatasetConfig(
        name="reviews",
        schema_path=root / "schema.pbtxt",
        dense=(),
        categorical=(),
        bucketized={},
        text={"review": REVIEW, "title": TITLE},
        label=LabelRule(name="good", column="stars", op="greater_equal", threshold=4),
        split={"train": 1, "eval": 1},
        slices=(),
    )
    rows = [(review, "Top film" if i % 2 else "Flop", 1 + i % 5) for i, review in enumerate([*REVIEWS, MISSING])]
    instances = [{"review": [] if r is None else [r.encode()], "title": [t.encode()], "stars": [s]} for r, t, s in rows]
    metadata = dataset_metadata.DatasetMetadata(schema)
    with tft_beam.Context(temp_dir=str(root / "tmp")):
        (beam_out, _), transform_fn = (instances, metadata) | tft_beam.AnalyzeAndTransformDataset(
            lambda inputs: transform(inputs, cfg)
        )
        _ = transform_fn | tft_beam.WriteTransformFn(str(root / "transform_graph"))
    # TFX's Transform records the raw schema beside the graph; the Trainer parses raw examples with it.
    metadata_io.write_metadata(metadata, str(root / "transform_graph" / tft.TFTransformOutput.RAW_METADATA_DIR))
    return Run(rows, beam_out, tft.TFTransformOutput(str(root / "transform_graph")), schema, cfg)


def test_training_and_serving_give_the_same_ids_and_buckets(run):
    served = run.serve(run.rows)
    for key in ("review_xf", "title_xf"):
        beam = np.stack([row[key] for row in run.beam_out])
        assert beam.dtype == np.int64 and beam.shape == served[key].shape
        np.testing.assert_array_equal(beam, served[key])
    for key in ("review_length_bucket", "title_length_bucket"):
        assert [row[key] for row in run.beam_out] == served[key].tolist()


def test_the_trainers_token_id_arrays_are_what_beam_wrote(run, tmp_path):
    """The Trainer runs the raw examples through the saved graph (Transform writes no transformed examples): its
    arrays hold the ids and labels of Beam's analyze+transform, row for row."""
    split = tmp_path / "Split-train"
    split.mkdir()
    with tf.io.TFRecordWriter(str(split / "data-0.gz"), tf.io.TFRecordOptions(compression_type="GZIP")) as writer:
        for row in run.rows:
            writer.write(_example(*row))
    layout = layout_from_transform(run.cfg, run.out)

    materialize({"train": str(split)}, layout, through_transform_graph(run.out, layout), tmp_path / "arrays")

    arrays = ArraySplit.load(tmp_path / "arrays" / "train")
    assert arrays.sequence_names == layout.sequences == ("review_xf", "title_xf")
    for key, ids in zip(layout.sequences, arrays.sequences, strict=True):
        np.testing.assert_array_equal(ids, np.stack([row[key] for row in run.beam_out]))
    np.testing.assert_array_equal(arrays.label, [row[layout.label] for row in run.beam_out])


def test_equivalent_spellings_get_the_same_ids(run):
    ids = dict(zip(REVIEWS, run.serve(run.rows)["review_xf"][: len(REVIEWS)], strict=True))
    for review, same in REVIEWS.items():
        if same is not None:
            np.testing.assert_array_equal(ids[review], ids[same], err_msg=f"{review!r} vs {same!r}")
    assert (ids["Café crème brûlée, très bien!"] >= 2).sum() == 7  # café crème brûlée , très bien !: all known
    assert (ids["loved it 👍🏽 ❤️ 👨\u200d👩\u200d👧 !!"] > PADDING_ID).sum() == 10  # 2 words, 6 emoji, 2 "!"


def test_empty_whitespace_and_missing_texts_are_all_padding(run):
    served = run.serve([("", "", 1), (" \t\n\u00a0\u3000 ", "", 1), (None, None, 1)])
    assert not served["review_xf"].any() and not served["title_xf"].any()
    assert served["review_length_bucket"].tolist() == [b"000"] * 3


def test_a_long_text_keeps_its_first_tokens_and_says_it_was_truncated(run):
    (row,) = run.serve([(LONG, "", 1)])["review_xf"]
    vocabulary = [t.decode() for t in run.out.vocabulary_by_name("review_tokens")]
    expected = [vocabulary.index(token) + 2 for token in LONG.split()[: REVIEW.max_length]]
    assert row.tolist() == expected
    (bucket,) = run.serve([(LONG, "", 1)])["review_length_bucket"]
    assert bucket == b"over 12 (truncated)"


def test_reserved_ids_padding_at_the_end_and_unknown_tokens(run):
    served = run.serve([("great zzzunseen movie qqq", "", 1), ("great", "zzzq", 1)])
    assert served["review_xf"][0][:4].tolist()[1::2] == [UNKNOWN_ID, UNKNOWN_ID]  # no OOV buckets: one id
    assert min(served["review_xf"][0][::2][:2]) >= 2 and not served["review_xf"][0][4:].any()
    served = run.serve(run.rows)
    for ids in [*served["review_xf"], *served["title_xf"]]:
        used = int((ids != PADDING_ID).sum())
        assert not ids[used:].any() and (ids[:used] != PADDING_ID).all()  # padding only after the last token
    vocabulary = run.out.vocabulary_size_by_name("title_tokens")
    # "<zz", "zzz": n-grams never seen, in the OOV buckets after the vocabulary
    unseen = run.serve([("great", "zzzq", 1)])["title_xf"][0][:2]
    assert ((unseen >= 2 + vocabulary) & (unseen < 2 + vocabulary + TITLE.num_oov_buckets)).all()


def test_the_id_range_is_recorded_for_the_model(run):
    for key, feature in (("review", REVIEW), ("title", TITLE)):
        size = model_vocab_size(run.out, key, feature)
        assert run.out.num_buckets_for_transformed_feature(f"{key}_xf") == size
        assert np.stack([row[f"{key}_xf"] for row in run.beam_out]).max() < size
    assert run.out.transformed_feature_spec()["review_xf"] == tf.io.FixedLenFeature([12], tf.int64)


def test_invalid_utf8_at_serving_is_replaced_not_an_error(run):
    parsed = tf.io.parse_example(tf.constant([_example("ok", "", 1)]), run.spec)
    parsed["review"] = tf.SparseTensor([[0, 0]], tf.constant([b"ok \xff\xfe"]), [1, 1])
    ids = run.out.transform_features_layer()(parsed)["review_xf"].numpy()[0]
    assert (ids > PADDING_ID).sum() == 3  # ok and two U+FFFD symbols


# -- normalization, tokens, buckets (eager) -------------------------------------------------------------------
BLOCKS = {
    "Latin-1 Supplement": (0x0080, 0x00FF),
    "Latin Extended-A": (0x0100, 0x017F),
    "Latin Extended-B": (0x0180, 0x024F),
    "Latin Extended Additional": (0x1E00, 0x1EFF),
    "Superscripts and Subscripts": (0x2070, 0x209F),
    "Alphabetic Presentation Forms (ligatures)": (0xFB00, 0xFB4F),
    "Halfwidth and Fullwidth Forms": (0xFF00, 0xFFEF),
}


@pytest.mark.parametrize("block", BLOCKS)
def test_normalization_is_pythons_nfkc_then_lower_case(block):
    low, high = BLOCKS[block]
    chars = [chr(c) for c in range(low, high + 1)]
    # every codepoint alone, its canonical decomposition (accents as combining marks), and the whole block
    corpus = chars + [unicodedata.normalize("NFD", c) for c in chars] + ["".join(chars)]
    got = [t.decode() for t in text_features.normalize(tf.constant(corpus)).numpy()]
    expected = [unicodedata.normalize("NFKC", text).lower() for text in corpus]
    wrong = [(text, g, e) for text, g, e in zip(corpus, got, expected, strict=True) if g != e]
    assert wrong == []


def test_a_mark_after_a_compatibility_character_composes_with_its_replacement():
    """Clusters looked up alone (one step) leave these as they are; Python's NFKC composes them."""
    corpus = ["\ufb01\u0301", "\uff76\uff9e", "\u017f\u0307"]  # fi ligature + acute, halfwidth ka + voiced, long s
    got = [t.decode() for t in text_features.normalize(tf.constant(corpus)).numpy()]
    assert got == ["f\u00ed", "\u30ac", "\u1e61"] == [unicodedata.normalize("NFKC", t).lower() for t in corpus]


def test_the_nfkc_table_covers_compatibility_characters_and_decomposed_accents():
    keys, values = text_features.nfkc_table()
    table = dict(zip(keys, values, strict=True))
    assert table["ﬁ"] == "fi" and table["\uff21"] == "A" and table["²"] == "2" and table["e\u0301"] == "é"
    assert "é" not in table and all(values)  # "" marks "not in the table"
    assert 5_000 < len(table) < 7_000


def test_words_and_char_ngrams():
    texts = tf.constant(["Don't<br />STOP!! 😀", "naïve café", ""])
    words = text_features.tokens(texts, TextFeature(max_length=8))
    assert [[t.decode() for t in row] for row in words.to_list()] == [
        ["don", "'", "t", "stop", "!", "!", "😀"],
        ["naïve", "café"],
        [],
    ]
    grams = text_features.tokens(texts[1:], TextFeature(max_length=8, tokenizer="char_ngrams", ngram_width=4))
    assert [t.decode() for t in grams.to_list()[0]] == ["<naï", "naïv", "aïve", "ïve>", "<caf", "café", "afé>"]
    short = text_features.tokens(tf.constant(["a !"]), TextFeature(max_length=8, tokenizer="char_ngrams"))
    assert [t.decode() for t in short.to_list()[0]] == ["<a>", "<!>"]  # shorter than the width: one n-gram


def test_length_bucket_labels_sort_by_length():
    uppers, labels = text_features.length_buckets(128)
    assert labels == ("000", "001-008", "009-016", "017-032", "033-064", "065-128", "over 128 (truncated)")
    assert uppers == (0, 8, 16, 32, 64, 128) and sorted(labels) == list(labels)
    assert text_features.length_buckets(5)[1] == ("000", "001-005", "over 5 (truncated)")
    assert text_features.length_buckets(1000)[1][-2:] == ("0513-1000", "over 1000 (truncated)")
    counts = tf.constant([0, 1, 8, 9, 128, 129, 10_000], tf.int64)
    assert text_features.length_bucket(counts, 128).numpy().tolist() == [
        b"000",
        b"001-008",
        b"001-008",
        b"009-016",
        b"065-128",
        b"over 128 (truncated)",
        b"over 128 (truncated)",
    ]
