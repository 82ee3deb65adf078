"""Normalization: layer, batch, instance, group, local response (LRN), mean-variance and Lp."""

from __future__ import annotations

import tensorflow as tf

from torchtfx.components.converter.ops.registry import DTYPES, op


def _stash_dtype(node, data: tf.Tensor) -> tf.DType:
    """The dtype of the statistics (``stash_type``, float32 by default): float32 means the network's float."""
    stash = DTYPES.get(node.attr("stash_type", 1), tf.float32)
    stash = node.float_dtype if stash == tf.float32 else stash
    return stash if data.dtype.is_floating and data.dtype.size < stash.size else data.dtype


def _moments(data: tf.Tensor, axes: list[int]) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(centered data, mean, variance) over ``axes``, kept as size-1 dims; the variance of the centered data."""
    mean = tf.reduce_mean(data, axes, keepdims=True)
    centered = data - mean
    return centered, mean, tf.reduce_mean(tf.square(centered), axes, keepdims=True)


def _per_channel(param: tf.Tensor, rank: int) -> tf.Tensor:
    """A [C] parameter shaped to broadcast along axis 1 of a rank-``rank`` tensor."""
    return tf.reshape(param, [-1] + [1] * (rank - 2)) if param.shape.rank == 1 else param


@op("LayerNormalization")
def _layer_norm(node, x):
    data, scale, bias = ([*x, None])[:3]
    rank = data.shape.rank
    axes = list(range(node.attr("axis", -1) % rank, rank))
    stash = _stash_dtype(node, data)
    centered, mean, variance = _moments(tf.cast(data, stash), axes)
    inv_std = tf.math.rsqrt(variance + node.attr("epsilon", 1e-5))
    y = tf.cast(centered * inv_std, data.dtype) * scale
    return [y if bias is None else y + bias, mean, inv_std]


@op("BatchNormalization")
def _batch_norm(node, x):
    data, scale, bias, mean, var = x[:5]
    rank, epsilon = data.shape.rank, node.attr("epsilon", 1e-5)
    if node.opset >= 14 and node.attr("training_mode", 0):
        return _batch_norm_training(node, data, scale, bias, mean, var)
    # Before opset 9, `spatial=0` gave the parameters one value per activation, [C, D1, ...]: they broadcast
    # as they are, while [C] parameters run along axis 1 (channels).
    factor = _per_channel(scale * tf.math.rsqrt(var + epsilon), rank)
    return [(data - _per_channel(mean, rank)) * factor + _per_channel(bias, rank)]


def _batch_norm_training(node, data, scale, bias, running_mean, running_var) -> list[tf.Tensor]:
    """Normalized by the batch's own statistics; the running statistics updated by ``momentum``."""
    rank, momentum = data.shape.rank, node.attr("momentum", 0.9)
    axes = [0, *range(2, rank)]
    centered, mean, variance = _moments(data, axes)
    y = centered * tf.math.rsqrt(variance + node.attr("epsilon", 1e-5))
    y = y * _per_channel(scale, rank) + _per_channel(bias, rank)
    mean, variance = tf.reshape(mean, [-1]), tf.reshape(variance, [-1])
    return [y, running_mean * momentum + mean * (1 - momentum), running_var * momentum + variance * (1 - momentum)]


@op("InstanceNormalization")
def _instance_norm(node, x):
    data, scale, bias = x
    rank = data.shape.rank
    centered, _, variance = _moments(data, list(range(2, rank)))
    y = centered * tf.math.rsqrt(variance + node.attr("epsilon", 1e-5))
    return [y * _per_channel(scale, rank) + _per_channel(bias, rank)]


@op("GroupNormalization")
def _group_norm(node, x):
    data, scale, bias = x
    rank, groups = data.shape.rank, int(node.attr("num_groups"))
    shape = tf.shape(data)
    grouped = tf.reshape(data, tf.stack([shape[0], groups, -1]))
    stash = _stash_dtype(node, data) if node.opset >= 21 else data.dtype
    centered, _, variance = _moments(tf.cast(grouped, stash), [2])
    y = tf.cast(centered * tf.math.rsqrt(variance + node.attr("epsilon", 1e-5)), data.dtype)
    # Opset 18 has one scale and bias per group, 21 one per channel: the same when C == num_groups, so a
    # parameter's known length decides (a model may declare an opset newer than the node's own).
    per_group = scale.shape[0] == groups if scale.shape[0] is not None else node.opset < 21
    if per_group:
        return [tf.reshape(y * scale[:, None] + bias[:, None], shape)]
    return [tf.reshape(y, shape) * _per_channel(scale, rank) + _per_channel(bias, rank)]


@op("LRN")
def _lrn(node, x):
    data = x[0]
    size = int(node.attr("size"))
    alpha, beta, bias = node.attr("alpha", 1e-4), node.attr("beta", 0.75), node.attr("bias", 1.0)
    # Channel c sums the squares of channels c - floor((size-1)/2) .. c + ceil((size-1)/2), zeros past the edges.
    before, after = (size - 1) // 2, size // 2
    squares = tf.square(data)
    padded = tf.pad(squares, [[0, 0], [before, after]] + [[0, 0]] * (data.shape.rank - 2))
    channels = data.shape[1] if data.shape[1] is not None else tf.shape(data)[1]
    square_sum = tf.add_n([padded[:, k : k + channels] for k in range(size)])
    return [data / tf.pow(bias + (alpha / size) * square_sum, beta)]


@op("MeanVarianceNormalization")
def _mvn(node, x):
    data = x[0]
    axes = [a % data.shape.rank for a in node.attr("axes", [0, 2, 3])]
    mean = tf.reduce_mean(data, axes, keepdims=True)
    # ONNX's function body: the variance as E[X^2] - E[X]^2, epsilon added to the standard deviation.
    variance = tf.reduce_mean(tf.square(data), axes, keepdims=True) - tf.square(mean)
    # In float16 the epsilon rounds to 0: a constant slice (0 / 0) gives 0, as it does in float32.
    return [tf.math.divide_no_nan(data - mean, tf.sqrt(variance) + tf.cast(1e-9, data.dtype))]


@op("LpNormalization")
def _lp_norm(node, x):
    data = x[0]
    axis, p = node.attr("axis", -1), node.attr("p", 2)
    if p == 1:
        norm = tf.reduce_sum(tf.abs(data), axis, keepdims=True)
    elif p == 2:
        norm = tf.sqrt(tf.reduce_sum(tf.square(data), axis, keepdims=True))
    else:
        raise ValueError(f"LpNormalization with p={p}: ONNX defines only p=1 and p=2")
    return [tf.math.divide_no_nan(data, norm)]
