"""The config-driven preprocessing_fn, run for real through tft_beam on 800 taxi rows."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests import helpers
from torchtfx.data.config.dataset import LabelRule
from torchtfx.pipeline.preprocessing import label_fn


def test_dense_features_are_z_scored(tiny_taxi):
    xf = helpers.transform_examples(tiny_taxi.tft_output, tiny_taxi.examples_path)
    fare = xf["fare_xf"].reshape(-1)
    assert abs(fare.mean()) < 1e-3 and abs(fare.std() - 1.0) < 1e-2


def test_categoricals_get_vocabulary_ids_with_oov_buckets(tiny_taxi):
    cfg, out = tiny_taxi.cfg, tiny_taxi.tft_output
    vocab = out.vocabulary_by_name("payment_type")
    assert b"Cash" in vocab and b"Credit Card" in vocab
    assert out.num_buckets_for_transformed_feature("payment_type_xf") == len(vocab) + cfg.vocab_num_oov_buckets
    # An unseen value goes to an OOV bucket instead of failing.
    raw = tf.train.Example()
    raw.features.feature["payment_type"].bytes_list.value.append(b"Bitcoin")
    parsed = tf.io.parse_example([raw.SerializeToString()], {"payment_type": out.raw_feature_spec()["payment_type"]})
    ids = out.transform_features_layer()(parsed)["payment_type_xf"].numpy()
    assert ids[0] >= len(vocab)


def test_bucketized_features_fall_in_configured_buckets(tiny_taxi):
    xf = helpers.transform_examples(tiny_taxi.tft_output, tiny_taxi.examples_path)
    buckets = xf["pickup_latitude_xf"].reshape(-1)
    assert buckets.min() >= 0 and buckets.max() <= 9
    assert len(np.unique(buckets)) >= 8


def test_label_is_tips_over_twenty_percent_of_fare(tiny_taxi):
    xf = helpers.transform_examples(tiny_taxi.tft_output, tiny_taxi.examples_path)
    labels = xf["big_tipper_xf"].reshape(-1)
    assert set(np.unique(labels)) <= {0, 1} and 0.1 < labels.mean() < 0.6


def test_label_rules_handle_missing_values_and_membership():
    # row 1 has no tips value at all -> label 0; rows 0 and 2 tip 30% and 10% of a 10.0 fare
    tips = tf.SparseTensor(indices=[[0, 0], [2, 0]], values=[3.0, 1.0], dense_shape=[3, 1])
    fare = tf.constant([[10.0], [10.0], [10.0]])
    rule = LabelRule(name="y", column="tips", op="greater", threshold=0.2, relative_to="fare")
    assert label_fn({"tips": tips, "fare": fare}, rule).numpy().tolist() == [1, 0, 0]
    low = LabelRule(name="y", column="tips", op="less", threshold=0.2, relative_to="fare")
    assert label_fn({"tips": tips, "fare": fare}, low).numpy().tolist() == [0, 0, 1]
    member = LabelRule(name="y", column="kind", op="in", positive_values=("a", "c"))
    kinds = tf.constant([[b"a"], [b"b"], [b"c"]])
    assert label_fn({"kind": kinds}, member).numpy().tolist() == [1, 0, 1]
