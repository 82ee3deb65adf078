"""A ``tokenizer: pretrained`` text feature through the real preprocessing_fn (Beam's analyze+transform) and the
saved transform graph as serving runs it: both give the checkpoint tokenizer's own ids, the ids ``tokenizers``
gives, on a tiny random BERT checkpoint (tests/fixtures/tiny_bert.py)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

from tests.fixtures.tiny_bert import PAD_ID, save_tiny_bert
from torchtfx.data.config.dataset import DatasetConfig, LabelRule
from torchtfx.data.config.text import TextFeature
from torchtfx.pipeline.transform.preprocessing import transform

tokenizers = pytest.importorskip("tokenizers")
SCHEMA = """
feature { name: "review" type: BYTES value_count { max: 1 } }
feature { name: "stars" type: INT presence { min_fraction: 1.0 } shape { dim { size: 1 } } }
"""
MAX_LENGTH = 12
REVIEWS = [
    "A gripping film with a wonderful cast!",
    "Une comédie DRÔLE [SEP] et touchante",
    "",
    "the the the the the the the the the the the the the the the the the the",  # truncated
    "zzzzqqqq unknownish 👍🏽",
]


def _example(review: str, stars: int) -> bytes:
    feature = {
        "stars": tf.train.Feature(int64_list=tf.train.Int64List(value=[stars])),
        "review": tf.train.Feature(bytes_list=tf.train.BytesList(value=[review.encode()])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture(scope="module")
def transformed(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrained")
    checkpoint = save_tiny_bert(root / "bert")
    (root / "schema.pbtxt").write_text(SCHEMA)
    schema = text_format.Parse(SCHEMA, schema_pb2.Schema())
    feature = TextFeature(max_length=MAX_LENGTH, tokenizer="pretrained", checkpoint=str(checkpoint))
    cfg = DatasetConfig(
        name="reviews",
        schema_path=root / "schema.pbtxt",
        dense=(),
        categorical=(),
        bucketized={},
        text={"review": feature},
        label=LabelRule(name="good", column="stars", op="greater_equal", threshold=4),
        split={"train": 1, "eval": 1},
        slices=(),
    )
    instances = [{"review": [r.encode()], "stars": [1 + i % 5]} for i, r in enumerate(REVIEWS)]
    with tft_beam.Context(temp_dir=str(root / "tmp")):
        (beam_out, _), transform_fn = (instances, dataset_metadata.DatasetMetadata(schema)) | (
            tft_beam.AnalyzeAndTransformDataset(lambda inputs: transform(inputs, cfg))
        )
        _ = transform_fn | tft_beam.WriteTransformFn(str(root / "graph"))
    out = tft.TFTransformOutput(str(root / "graph"))
    parsed = tf.io.parse_example(
        tf.constant([_example(r, 1) for r in REVIEWS]), schema_utils.schema_as_feature_spec(schema).feature_spec
    )
    served = {k: v.numpy() for k, v in out.transform_features_layer()(parsed).items()}
    reference = tokenizers.Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    reference.enable_truncation(MAX_LENGTH)
    reference.enable_padding(pad_id=PAD_ID, length=MAX_LENGTH)
    want = np.array([e.ids for e in reference.encode_batch(REVIEWS)])
    return beam_out, served, want, out, reference.get_vocab_size()


def test_analysis_and_serving_give_the_checkpoint_tokenizers_ids(transformed):
    beam_out, served, want, *_ = transformed
    np.testing.assert_array_equal(np.stack([row["review_xf"] for row in beam_out]), want)
    np.testing.assert_array_equal(served["review_xf"], want)
    assert served["review_xf"].dtype == np.int64


def test_length_buckets_count_the_tokens_before_truncation(transformed):
    beam_out, served, *_ = transformed
    buckets = [row["review_length_bucket"] for row in beam_out]
    assert buckets == served["review_length_bucket"].tolist()
    assert buckets[2] == b"001-008"  # [CLS] [SEP]
    assert buckets[3] == f"over {MAX_LENGTH} (truncated)".encode()


def test_the_id_range_is_the_tokenizers_vocabulary(transformed):
    *_, out, vocab_size = transformed
    domain = next(f.int_domain for f in out.transformed_metadata.schema.feature if f.name == "review_xf")
    assert (domain.min, domain.max) == (0, vocab_size - 1)
