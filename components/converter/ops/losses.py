"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, over [N, C] or [N, C, d1, ..., dk] inputs."""

from __future__ import annotations

import tensorflow as tf

from torchtfx.components.converter.ops.registry import op


def _negative_log_likelihood(node, log_prob: tf.Tensor, target: tf.Tensor, weight: tf.Tensor | None) -> tf.Tensor:
    rank, ignore = log_prob.shape.rank, node.attr("ignore_index")
    reduction = node.attr("reduction", b"mean")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    valid = None if ignore is None else tf.not_equal(target, tf.cast(ignore, target.dtype))
    # An ignored target may lie outside [0, C) (e.g. -1): it reads class 0, whose loss is then weighted 0.
    safe = target if valid is None else tf.where(valid, target, tf.zeros_like(target))
    classes_last = tf.transpose(log_prob, [0, *range(2, rank), 1]) if rank > 2 else log_prob
    loss = -tf.gather(classes_last, safe[..., None], batch_dims=rank - 1)[..., 0]
    weights = None if weight is None else tf.gather(weight, safe)
    if valid is not None:
        weights = tf.where(valid, tf.ones_like(loss) if weights is None else weights, tf.zeros_like(loss))
    if weights is not None:
        loss = loss * weights
    if reduction == "none":
        return loss
    if reduction == "sum":
        return tf.reduce_sum(loss)
    if reduction != "mean":
        raise ValueError(f"{node.op_type} with reduction={reduction!r}: ONNX defines none, sum and mean")
    # mean: the sum divided by the sum of the weights applied (an ignored target's weight is 0)
    return tf.reduce_mean(loss) if weights is None else tf.reduce_sum(loss) / tf.reduce_sum(weights)


@op("NegativeLogLikelihoodLoss")
def _nll_loss(node, x):
    log_prob, target, weight = ([*x, None])[:3]
    return [_negative_log_likelihood(node, log_prob, target, weight)]


@op("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy(node, x):
    scores, labels, weight = ([*x, None])[:3]
    log_prob = tf.nn.log_softmax(scores, axis=1)
    return [_negative_log_likelihood(node, log_prob, labels, weight), log_prob]
