"""Transform's ``preprocessing_fn``, driven entirely by the dataset config.

Dense features are z-scored, categorical features get a vocabulary with OOV buckets, bucketized
features get quantile buckets, text features get token ids (pipeline/transform/text_features.py), and the label is
derived by the config's label rule. Missing numeric values are filled with the configured default or the
feature's mean; missing categoricals become their own token ("" or -1), so they get their own embedding row;
a missing text is an empty one.

An integer-coded categorical whose curated schema gives a small ``int_domain`` (hours, days, months,
community areas) needs no vocabulary: its id is ``value - min``, with one id for a missing value and the
OOV buckets for values outside the domain. Each vocabulary costs Transform a count over the data and
several Beam stages; the schema is the contract the DataGate enforces, so its domain is known up front.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tensorflow_transform as tft
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform import schema_inference

from torchtfx.components.shared.contracts import DATASET_CONFIG_KEY
from torchtfx.data.config.dataset import DatasetConfig, LabelRule, transformed_name
from torchtfx.data.config.task import BINARY, MULTICLASS
from torchtfx.pipeline.transform.text_features import text_outputs


def _to_dense(x: tf.Tensor | tf.SparseTensor, default: Any) -> tf.Tensor:
    """A rank-1 dense tensor with one value per example; absent values become ``default``."""
    if isinstance(x, tf.SparseTensor):
        x = tf.sparse.to_dense(
            tf.SparseTensor(x.indices, x.values, [x.dense_shape[0], 1]),
            default_value=tf.cast(default, x.dtype),
        )
    return tf.reshape(x, [-1])


def _values(x: tf.Tensor | tf.SparseTensor) -> tf.Tensor:
    return x.values if isinstance(x, tf.SparseTensor) else x


def _as_float(x: tf.Tensor | tf.SparseTensor) -> tf.Tensor | tf.SparseTensor:
    if isinstance(x, tf.SparseTensor):
        return tf.SparseTensor(x.indices, tf.cast(x.values, tf.float32), x.dense_shape)
    return tf.cast(x, tf.float32)


def numeric_feature(x: tf.Tensor | tf.SparseTensor, default: float | None) -> tf.Tensor:
    """float32 [batch]; missing values become ``default`` or, if unset, the feature's mean."""
    x = _as_float(x)
    fill = tf.constant(default, tf.float32) if default is not None else tft.mean(_values(x))
    return _to_dense(x, fill)


# Every analyzer below reads the raw present values, never another analyzer's output: TFT then computes
# them all in one pass over the data. Filling with the mean first and analyzing the filled column (as
# tft.scale_to_z_score(numeric_feature(x)) would) makes a second full pass over the data.


def z_scored(x: tf.Tensor | tf.SparseTensor, default: float | None, name: str) -> tf.Tensor:
    """(x - mean) / std over the present values; a missing value becomes ``default`` (z-scored), or 0 (the mean)."""
    if default is not None:
        return tft.scale_to_z_score(numeric_feature(x, default), name=name)
    x = _as_float(x)
    with tf.compat.v1.name_scope(name):
        values = _values(x)
        mean, var = tft.mean(values), tft.var(values)
        centered = _to_dense(x, mean) - mean
        return tf.where(var > 0, centered * tf.math.rsqrt(var), centered)


def bucketized(x: tf.Tensor | tf.SparseTensor, default: float | None, num_buckets: int, name: str) -> tf.Tensor:
    """Quantile bucket ids of the present values; a missing value gets the bucket of ``default`` or the mean."""
    x = _as_float(x)
    with tf.compat.v1.name_scope(name):
        values = _values(x)
        boundaries = tft.quantiles(values, num_buckets, epsilon=min(1.0 / num_buckets, 0.01))  # tft.bucketize's
        fill = tf.constant(default, tf.float32) if default is not None else tft.mean(values)
        return tft.apply_buckets(_to_dense(x, fill), boundaries)


def categorical_feature(x: tf.Tensor | tf.SparseTensor, default: Any) -> tf.Tensor:
    """Raw categorical values [batch]; missing values become their own token."""
    if default is None:
        default = "" if x.dtype == tf.string else -1
    return _to_dense(x, default)


# Larger integer domains keep a vocabulary: it holds only the values seen, not every id the schema allows.
MAX_DOMAIN_IDS = 10_000


def schema_int_domains(schema_path: str) -> dict[str, tuple[int, int]]:
    """``{feature: (min, max)}`` for the INT features whose schema ``int_domain`` bounds at most
    ``MAX_DOMAIN_IDS`` values (read from the curated schema that ImportSchemaGen imports)."""
    schema = text_format.Parse(tf.io.gfile.GFile(schema_path).read(), schema_pb2.Schema())
    domains = {}
    for feature in schema.feature:
        domain = feature.int_domain
        if feature.type != schema_pb2.INT or not (domain.HasField("min") and domain.HasField("max")):
            continue
        if 0 < domain.max - domain.min + 1 <= MAX_DOMAIN_IDS:
            domains[feature.name] = (domain.min, domain.max)
    return domains


def domain_ids(x: tf.Tensor | tf.SparseTensor, domain: tuple[int, int], default: Any, num_oov: int) -> tf.Tensor:
    """int64 ids [batch]: ``value - min`` inside the domain; ``size`` for a missing value (or the id of
    ``default``); ``size + 1 + value mod num_oov`` outside it (``size`` when there are no OOV buckets)."""
    low, high = domain
    size = high - low + 1
    if default is not None:
        values, present = tf.cast(_to_dense(x, default), tf.int64), None
    else:
        values = tf.cast(_to_dense(x, low), tf.int64)
        present = _present(x)
    inside = tf.logical_and(values >= low, values <= high)
    outside = size + 1 + tf.math.floormod(values, num_oov) if num_oov else tf.fill(tf.shape(values), size)
    ids = tf.where(inside, values - low, tf.cast(outside, tf.int64))
    if present is not None:
        ids = tf.where(present, ids, tf.cast(size, tf.int64))
    # What compute_and_apply_vocabulary records: the ids' range, read back as the embedding's cardinality.
    schema_inference.set_tensor_schema_override(ids, tf.constant(0, tf.int64), tf.constant(size + num_oov, tf.int64))
    return ids


def _present(x: tf.Tensor | tf.SparseTensor) -> tf.Tensor:
    """bool [batch]: whether each row has a value."""
    if isinstance(x, tf.SparseTensor):
        return _to_dense(tf.SparseTensor(x.indices, tf.ones_like(x.values, tf.bool), x.dense_shape), False)
    return tf.ones_like(tf.reshape(x, [-1]), tf.bool)


def label_strings(x: tf.Tensor | tf.SparseTensor) -> tuple[tf.Tensor, tf.Tensor]:
    """A categorical label column as strings [batch] (integer codes written out), and whether each row has a
    value: absent, or the empty string, is missing. A missing row's string is the column's missing token."""
    raw = categorical_feature(x, None)
    present = _present(x)
    if raw.dtype != tf.string:
        return tf.strings.as_string(raw), present
    return raw, tf.logical_and(present, tf.not_equal(raw, ""))


def binary_label(inputs: dict[str, Any], rule: LabelRule) -> tuple[tf.Tensor, tf.Tensor]:
    """(label int64 [batch] in {0, 1}, present bool [batch]). A row whose label inputs are missing (no value,
    NaN, or an empty string) is not present, and its label is 0; :func:`label_outputs` refuses it or keeps the 0,
    as ``label.missing`` says."""
    if rule.op == "in":
        raw, present = label_strings(inputs[rule.column])
        positive = tf.constant(list(rule.positive_values), tf.string)
        hit = tf.logical_and(present, tf.reduce_any(tf.equal(raw[:, None], positive[None, :]), axis=1))
        return tf.cast(hit, tf.int64), present
    value = numeric_feature(inputs[rule.column], float("nan"))
    threshold = tf.constant(rule.threshold, tf.float32)
    if rule.relative_to:
        threshold = threshold * numeric_feature(inputs[rule.relative_to], float("nan"))
    compare = {
        "greater": tf.greater,
        "greater_equal": tf.greater_equal,
        "less": tf.less,
        "less_equal": tf.less_equal,
        "equal": tf.equal,
    }[rule.op]
    missing = tf.math.logical_or(tf.math.is_nan(value), tf.math.is_nan(threshold))
    label = tf.where(missing, tf.zeros_like(value, tf.int64), tf.cast(compare(value, threshold), tf.int64))
    return label, tf.logical_not(missing)


def multiclass_label(inputs: dict[str, Any], cfg: DatasetConfig) -> tuple[tf.Tensor, tf.Tensor]:
    """(class id int64 [batch], weight float32 [batch]): the ``num_classes`` most frequent values are the
    classes, in TFT's vocabulary order. No OOV bucket: a missing or unknown value is refused (id 0, weight 0),
    so it can neither be learnt as a class nor counted by TFMA."""
    raw, present = label_strings(inputs[cfg.label.column])
    vocabulary = tft.vocabulary(
        tf.boolean_mask(raw, present),
        top_k=cfg.label.num_classes,
        vocab_filename=cfg.label_vocabulary,
        name=f"label_vocabulary_{cfg.label.name}",
    )
    ids = tft.apply_vocabulary(raw, vocabulary, default_value=-1)
    known = tf.logical_and(present, ids >= 0)
    return tf.where(known, ids, tf.zeros_like(ids)), tf.cast(known, tf.float32)


def regression_target(inputs: dict[str, Any], rule: LabelRule) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(training target, target in the column's units, weight), float32 [batch]. The training target is
    ``log1p(y)`` under ``log1p``; missing or non-finite targets (and negative ones under log1p) are refused:
    weight 0 and target 0, which keeps every tensor finite for the loss and TFMA."""
    value = numeric_feature(inputs[rule.column], float("nan"))
    usable = tf.math.is_finite(value)
    if rule.log1p:
        usable = tf.logical_and(usable, value >= 0)
    value = tf.where(usable, value, tf.zeros_like(value))
    target = tf.math.log1p(value) if rule.log1p else value
    return target, value, tf.cast(usable, tf.float32)


def label_outputs(inputs: dict[str, Any], cfg: DatasetConfig) -> dict[str, tf.Tensor]:
    """The label, its weight where a row can be refused (``cfg.label_weight_key``), and for regression the target
    in serving units."""
    if cfg.task == BINARY:
        label, present = binary_label(inputs, cfg.label)
        if not cfg.label_weight_key:  # label.missing: negative, or no label column can be missing
            return {cfg.label_key: label}
        return {cfg.label_key: label, cfg.label_weight_key: tf.cast(present, tf.float32)}
    if cfg.task == MULTICLASS:
        ids, weight = multiclass_label(inputs, cfg)
        return {cfg.label_key: ids, cfg.label_weight_key: weight}
    target, original, weight = regression_target(inputs, cfg.label)
    return {cfg.label_key: target, cfg.eval_label_key: original, cfg.label_weight_key: weight}


def transform(inputs: dict[str, Any], cfg: DatasetConfig) -> dict[str, tf.Tensor]:
    """The feature transformations of one dataset (pure TFT; no TFX glue)."""
    outputs: dict[str, tf.Tensor] = {}
    for key in cfg.dense:
        outputs[transformed_name(key)] = z_scored(inputs[key], cfg.defaults.get(key), name=f"zscore_{key}")
    domains = schema_int_domains(str(cfg.schema_path))
    for key in cfg.categorical:
        if key in domains and inputs[key].dtype != tf.string:
            outputs[transformed_name(key)] = domain_ids(
                inputs[key], domains[key], cfg.defaults.get(key), cfg.vocab_num_oov_buckets
            )
            continue
        outputs[transformed_name(key)] = tft.compute_and_apply_vocabulary(
            categorical_feature(inputs[key], cfg.defaults.get(key)),
            top_k=cfg.vocab_top_k,
            num_oov_buckets=cfg.vocab_num_oov_buckets,
            vocab_filename=key,
            name=f"vocabulary_{key}",
        )
    for key, num_buckets in cfg.bucketized.items():
        outputs[transformed_name(key)] = bucketized(
            inputs[key], cfg.defaults.get(key), num_buckets, name=f"bucketize_{key}"
        )
    for key in sorted(cfg.text):  # token ids and a length bucket (pipeline/transform/text_features.py)
        outputs.update(text_outputs(categorical_feature(inputs[key], cfg.defaults.get(key)), key, cfg.text[key]))
    outputs.update(label_outputs(inputs, cfg))
    return outputs


def preprocessing_fn(inputs: dict[str, Any], custom_config: dict[str, Any]) -> dict[str, tf.Tensor]:
    """Entry point for TFX Transform, by its dotted path ``torchtfx.pipeline.transform.PREPROCESSING_FN``."""
    return transform(inputs, DatasetConfig.from_json(custom_config[DATASET_CONFIG_KEY]))
