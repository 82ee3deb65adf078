"""The config-driven preprocessing_fn, run for real through tft_beam on 800 taxi rows."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests import helpers
from torchtfx.data.config.dataset import LabelRule
from torchtfx.pipeline.transform.preprocessing import binary_label, schema_int_domains


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


def _label(inputs, rule) -> tuple[list[int], list[bool]]:
    label, present = binary_label(inputs, rule)
    return label.numpy().tolist(), present.numpy().tolist()


def test_label_rules_mark_rows_with_a_missing_input_and_handle_membership():
    # row 1 has no tips value at all -> label 0, not present; rows 0 and 2 tip 30% and 10% of a 10.0 fare
    tips = tf.SparseTensor(indices=[[0, 0], [2, 0]], values=[3.0, 1.0], dense_shape=[3, 1])
    fare = tf.constant([[10.0], [10.0], [10.0]])
    rule = LabelRule(name="y", column="tips", op="greater", threshold=0.2, relative_to="fare")
    assert _label({"tips": tips, "fare": fare}, rule) == ([1, 0, 0], [True, False, True])
    low = LabelRule(name="y", column="tips", op="less", threshold=0.2, relative_to="fare")
    assert _label({"tips": tips, "fare": fare}, low) == ([0, 0, 1], [True, False, True])
    no_fare = tf.SparseTensor(indices=[[0, 0], [1, 0]], values=[10.0, 10.0], dense_shape=[3, 1])
    assert _label({"tips": tips, "fare": no_fare}, rule) == ([1, 0, 0], [True, False, False])  # relative_to too
    member = LabelRule(name="y", column="kind", op="in", positive_values=("a", "c"))
    kinds = tf.constant([[b"a"], [b"b"], [b"c"], [b""]])
    assert _label({"kind": kinds}, member) == ([1, 0, 1, 0], [True, True, True, False])


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
    from torchtfx.pipeline.transform.preprocessing import regression_target

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
    from torchtfx.pipeline.transform.preprocessing import label_strings

    codes = tf.SparseTensor(indices=[[0, 0], [2, 0]], values=tf.constant([3, 5], tf.int64), dense_shape=[3, 1])
    strings, present = label_strings(codes)
    assert strings.numpy().tolist() == [b"3", b"-1", b"5"] and present.numpy().tolist() == [True, False, True]
    names = tf.constant([[b"Cash"], [b""]])
    strings, present = label_strings(names)
    assert strings.numpy().tolist() == [b"Cash", b""] and present.numpy().tolist() == [True, False]


# A flights-like dataset: the arrival delay is optional in the schema (a cancelled flight has none).
FLIGHTS_SCHEMA = """
feature { name: "distance" type: FLOAT presence { min_fraction: 1.0 } shape { dim { size: 1 } } }
feature { name: "carrier" type: BYTES presence { min_fraction: 1.0 } shape { dim { size: 1 } } }
feature { name: "arr_delay" type: FLOAT value_count { max: 1 } }
"""
FLIGHTS = """
name: flights
schema: {schema}
features: {{dense: [distance], categorical: [carrier]}}
label: {{name: late, column: arr_delay, op: greater, threshold: 15{extra}}}
"""
# (distance, carrier, arr_delay): three cancelled flights, one per carrier, have no arrival delay.
FLIGHT_ROWS = [
    (100.0 * (i + 1), "AA BB CC".split()[i % 3], None if i in (2, 6, 10) else float(i * 4)) for i in range(12)
]


def _flights(tmp_path, extra: str = ""):
    """The flights rows through the real preprocessing_fn (TFT analyze + transform): (config, output, features)."""
    from torchtfx.data.config.dataset import load_dataset_config

    (tmp_path / "schema.pbtxt").write_text(FLIGHTS_SCHEMA)
    config = tmp_path / "flights.yaml"
    config.write_text(FLIGHTS.format(schema=tmp_path / "schema.pbtxt", extra=extra))
    cfg = load_dataset_config(config)
    rows = [{"distance": str(d), "carrier": c, "arr_delay": "" if y is None else str(y)} for d, c, y in FLIGHT_ROWS]
    examples = helpers.write_examples(rows, helpers.read_schema(cfg.schema_path), tmp_path / "Split-train")
    tft_output = helpers.run_transform(cfg, examples.parent, tmp_path)
    return cfg, tft_output, helpers.transform_examples(tft_output, examples)


def test_a_binary_row_without_its_label_input_is_refused_and_counted(tmp_path, caplog):
    """A cancelled flight (no arrival delay) used to be labelled 0, "on time", trained and evaluated as such.
    Now its weight is 0, and the Trainer's materialize step leaves it out and counts it."""
    from torchtfx.components.torch_trainer.handoff.materialize import materialize, through_transform_graph
    from torchtfx.components.torch_trainer.modeling.features import layout_from_transform

    cfg, tft_output, xf = _flights(tmp_path)
    assert cfg.optional_label_columns == ("arr_delay",) and cfg.label_weight_key == "late_weight_xf"
    delays = [y for *_, y in FLIGHT_ROWS]
    assert xf["late_weight_xf"].reshape(-1).tolist() == [0.0 if y is None else 1.0 for y in delays]
    assert xf["late_xf"].reshape(-1).tolist() == [int(y is not None and y > 15) for y in delays]

    layout = layout_from_transform(cfg, tft_output)
    assert layout.label_weight == "late_weight_xf"
    graph = through_transform_graph(tft_output, layout)
    materialized = materialize({"train": str(tmp_path / "Split-train")}, layout, graph, tmp_path / "a")
    assert materialized.rows == {"train": 9} and materialized.refused == {"train": 3}
    assert "3 of 12 rows refused for their label (a label column without a value; label.missing: negative" in (
        caplog.text
    )


def test_label_missing_negative_keeps_labelling_such_rows_0(tmp_path):
    """The switch for those who want the behaviour of before: no weight column, label 0 (the EvalConfig and the
    transform output of before)."""
    cfg, _, xf = _flights(tmp_path, extra=", missing: negative")
    assert cfg.label_weight_key is None and not any(key.endswith("_weight_xf") for key in xf)
    assert xf["late_xf"].reshape(-1).tolist() == [int(y is not None and y > 15) for *_, y in FLIGHT_ROWS]
