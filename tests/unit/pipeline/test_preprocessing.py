"""The config-driven preprocessing_fn, run for real through tft_beam on 800 taxi rows."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests import helpers
from torchtfx.data.config.dataset import LabelRule
from torchtfx.pipeline.preprocessing import binary_label, schema_int_domains


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


def test_small_integer_domains_map_to_ids_without_a_vocabulary(tiny_taxi):
    """trip_start_hour (schema int_domain 0..23): ids 0..23, then one id for a missing value, then the OOV
    buckets; no vocabulary file (the analyzer's pass is what it saves). Census tracts (no domain) keep one."""
    cfg, out = tiny_taxi.cfg, tiny_taxi.tft_output
    assert "trip_start_hour" in schema_int_domains(str(cfg.schema_path))
    assert "pickup_census_tract" not in schema_int_domains(str(cfg.schema_path))
    assert out.num_buckets_for_transformed_feature("trip_start_hour_xf") == 24 + 1 + cfg.vocab_num_oov_buckets
    assert out.num_buckets_for_transformed_feature("pickup_community_area_xf") == 77 + 1 + cfg.vocab_num_oov_buckets
    assert not _has_vocabulary(out, "trip_start_hour")
    assert _has_vocabulary(out, "pickup_census_tract")
    rows = []
    for hour, area in ((0, 1), (23, 77), (5, None), (31, 78)):  # community area is optional in the schema
        raw = tf.train.Example()
        raw.features.feature["trip_start_hour"].int64_list.value.append(hour)
        if area is not None:
            raw.features.feature["pickup_community_area"].int64_list.value.append(area)
        rows.append(raw.SerializeToString())
    spec = {k: out.raw_feature_spec()[k] for k in ("trip_start_hour", "pickup_community_area")}
    xf = out.transform_features_layer()(tf.io.parse_example(rows, spec))
    assert xf["trip_start_hour_xf"].numpy().reshape(-1).tolist() == [0, 23, 5, 25 + 31 % 10]
    assert xf["pickup_community_area_xf"].numpy().reshape(-1).tolist() == [0, 76, 77, 78 + 78 % 10]


def _has_vocabulary(out, name: str) -> bool:
    return out.vocabulary_file_by_name(name) is not None  # None: no such file among the graph's assets


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
    assert binary_label({"tips": tips, "fare": fare}, rule).numpy().tolist() == [1, 0, 0]
    low = LabelRule(name="y", column="tips", op="less", threshold=0.2, relative_to="fare")
    assert binary_label({"tips": tips, "fare": fare}, low).numpy().tolist() == [0, 0, 1]
    member = LabelRule(name="y", column="kind", op="in", positive_values=("a", "c"))
    kinds = tf.constant([[b"a"], [b"b"], [b"c"]])
    assert binary_label({"kind": kinds}, member).numpy().tolist() == [1, 0, 1]


def test_multiclass_label_is_a_class_id_from_the_label_vocabulary(tiny_payment):
    cfg, out = tiny_payment.cfg, tiny_payment.tft_output
    classes = [v.decode() for v in out.vocabulary_by_name(cfg.label_vocabulary)]
    assert classes[:2] == ["Cash", "Credit Card"] and len(classes) == cfg.label.num_classes
    xf = helpers.transform_examples(out, tiny_payment.examples_path)
    ids, weight = xf[cfg.label_key].reshape(-1), xf[cfg.label_weight_key].reshape(-1)
    assert set(np.unique(ids)) <= {0, 1, 2} and set(np.unique(weight)) <= {0.0, 1.0}
    assert tiny_payment.layout.classes == tuple(classes)
    assert tiny_payment.layout.model_spec().num_outputs == 3


def test_an_unknown_or_missing_class_is_refused_not_mapped_to_a_class(tiny_payment):
    cfg, out = tiny_payment.cfg, tiny_payment.tft_output
    rows = []
    for value in (b"Cash", b"Bitcoin", b""):  # the schema requires the column; "" is its missing value
        raw = tf.train.Example()
        raw.features.feature["payment_type"].bytes_list.value.append(value)
        rows.append(raw.SerializeToString())
    spec = {"payment_type": out.raw_feature_spec()["payment_type"]}
    xf = out.transform_features_layer()(tf.io.parse_example(rows, spec))
    assert xf[cfg.label_weight_key].numpy().tolist() == [1.0, 0.0, 0.0]
    assert xf[cfg.label_key].numpy().tolist() == [0, 0, 0]  # refused rows carry a valid id with weight 0


def test_regression_target_is_log1p_with_the_dollars_kept_for_evaluation():
    from torchtfx.pipeline.preprocessing import regression_target

    tips = tf.SparseTensor(indices=[[0, 0], [2, 0], [3, 0]], values=[3.0, -1.0, 0.0], dense_shape=[4, 1])
    rule = LabelRule(name="y", column="tips", log1p=True)
    target, dollars, weight = (t.numpy().tolist() for t in regression_target({"tips": tips}, rule))
    assert weight == [1.0, 0.0, 0.0, 1.0]  # row 1 missing, row 2 negative under log1p
    np.testing.assert_allclose(target, [np.log1p(3.0), 0.0, 0.0, 0.0])
    assert dollars == [3.0, 0.0, 0.0, 0.0]
    plain_rule = LabelRule(name="y", column="tips")
    plain, _, plain_weight = (t.numpy().tolist() for t in regression_target({"tips": tips}, plain_rule))
    assert plain == [3.0, 0.0, -1.0, 0.0] and plain_weight == [1.0, 0.0, 1.0, 1.0]


def test_label_strings_write_out_integer_codes_and_mark_missing_rows():
    """A multiclass label may be an integer-coded column; its missing rows must be refused, not become a
    class "-1" (and the empty-string default must not be cast to an integer)."""
    from torchtfx.pipeline.preprocessing import label_strings

    codes = tf.SparseTensor(indices=[[0, 0], [2, 0]], values=tf.constant([3, 5], tf.int64), dense_shape=[3, 1])
    strings, present = label_strings(codes)
    assert strings.numpy().tolist() == [b"3", b"-1", b"5"] and present.numpy().tolist() == [True, False, True]
    names = tf.constant([[b"Cash"], [b""]])
    strings, present = label_strings(names)
    assert strings.numpy().tolist() == [b"Cash", b""] and present.numpy().tolist() == [True, False]
