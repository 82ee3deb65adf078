"""Convolutions: Conv, ConvInteger, ConvTranspose, DeformConv, and the spatial geometry pooling shares.

ONNX tensors are channels first (``[N, C, *spatial]``); TF's CPU kernels want channels last, so each op
transposes in and out (Grappler cancels a transpose pair between two such ops). Spatial sizes may be unknown
at trace time: a size is then a scalar tensor, and the geometry below computes with ints and tensors alike.
What TF's CPU kernels lack without oneDNN is avoided: a 3-D or transposed convolution with dilations gets a
kernel with zeros inserted instead, a grouped 3-D or transposed convolution is computed group by group.
"""

from __future__ import annotations

from typing import TypeAlias

import tensorflow as tf

from torchtfx.components.converter.ops.registry import op

Dim: TypeAlias = int | tf.Tensor  # a spatial size or pad: an int where known at trace time


def dims(x: tf.Tensor, first: int = 2) -> list[Dim]:
    """The sizes of ``x``'s axes from ``first`` on, ints where static."""
    dynamic = tf.shape(x)
    return [x.shape[i] if x.shape[i] is not None else dynamic[i] for i in range(first, x.shape.rank)]


def maximum(a: Dim, b: Dim) -> Dim:
    return max(a, b) if isinstance(a, int) and isinstance(b, int) else tf.maximum(a, b)


def to_last(x: tf.Tensor) -> tf.Tensor:
    """``[N, C, *spatial]`` -> ``[N, *spatial, C]``."""
    return tf.transpose(x, [0, *range(2, x.shape.rank), 1])


def to_first(x: tf.Tensor) -> tf.Tensor:
    """``[N, *spatial, C]`` -> ``[N, C, *spatial]``."""
    return tf.transpose(x, [0, x.shape.rank - 1, *range(1, x.shape.rank - 1)])


def auto_pad(node) -> str:
    value = node.attr("auto_pad", b"NOTSET")
    return value.decode() if isinstance(value, bytes) else value


def geometry(node, n: int, kernel: list[int]) -> tuple[list[int], list[int], list[int]]:
    """``(strides, dilations, pads)`` of a convolution or pooling node with ``n`` spatial axes."""
    strides = list(node.attr("strides", [1] * n))
    dilations = list(node.attr("dilations", [1] * n))
    pads = list(node.attr("pads", [0] * 2 * n))
    if len(kernel) != n:
        raise ValueError(f"kernel_shape {kernel} has not {n} spatial axes")
    return strides, dilations, pads


def same_pads(mode: str, sizes: list[Dim], kernel, strides, dilations) -> list[tuple[Dim, Dim]]:
    """``SAME_UPPER``/``SAME_LOWER``: output ``ceil(size / stride)``, the odd pad at the end/the start."""
    pads = []
    for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        total = maximum(((size + s - 1) // s - 1) * s + (k - 1) * d + 1 - size, 0)
        small = total // 2
        pads.append((small, total - small) if mode == "SAME_UPPER" else (total - small, small))
    return pads


def conv_pads(node, sizes: list[Dim], kernel, strides, dilations, pads) -> list[tuple[Dim, Dim]]:
    """Begin and end pad per spatial axis, by ``auto_pad``."""
    mode, n = auto_pad(node), len(sizes)
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        return same_pads(mode, sizes, kernel, strides, dilations)
    if mode == "VALID":
        return [(0, 0)] * n
    return [(pads[i], pads[i + n]) for i in range(n)]


def pad_spatial(x: tf.Tensor, pads: list[tuple[Dim, Dim]], value=0) -> tf.Tensor:
    """Pads the spatial axes of a channels-last ``x``."""
    if all(isinstance(p, int) and p == 0 for pair in pads for p in pair):
        return x
    paddings = [[0, 0], *[[b, e] for b, e in pads], [0, 0]]
    if not all(isinstance(p, int) for pair in pads for p in pair):
        paddings = tf.stack([tf.stack([tf.cast(p, tf.int32) for p in pair]) for pair in paddings])
    return tf.pad(x, paddings, constant_values=value)


def dilate(t: tf.Tensor, axis: int, rate: int) -> tf.Tensor:
    """``rate - 1`` zeros between neighbours along ``axis``."""
    if rate == 1:
        return t
    shape = tf.shape(t)
    spread = tf.pad(
        tf.expand_dims(t, axis + 1), [[0, 0]] * (axis + 1) + [[0, rate - 1]] + [[0, 0]] * (t.shape.rank - axis - 1)
    )
    merged = tf.reshape(spread, tf.concat([shape[:axis], [shape[axis] * rate], shape[axis + 1 :]], 0))
    return tf.gather(merged, tf.range(shape[axis] * rate - rate + 1), axis=axis)


def crop(y: tf.Tensor, ranges: list[tuple[Dim, Dim]]) -> tf.Tensor:
    """``y[:, b:e, ...]`` per spatial axis of a channels-last ``y`` (``(b, e)`` in ``ranges``); what lies
    outside ``y`` (``b < 0`` or ``e`` past its end) is zeros."""
    sizes = dims(y, 1)[:-1]
    before = [maximum(-b, 0) for b, _ in ranges]
    after = [maximum(e - size, 0) for (_, e), size in zip(ranges, sizes, strict=True)]
    y = pad_spatial(y, list(zip(before, after, strict=True)))
    index = [slice(None)] + [slice(b + p, e + p) for (b, e), p in zip(ranges, before, strict=True)] + [slice(None)]
    return y[tuple(index)]


def _conv_last(x: tf.Tensor, w: tf.Tensor, strides, dilations, group: int, padding) -> tf.Tensor:
    """Convolution of a channels-last ``x`` with ONNX weights ``w`` (``[M, C / group, *kernel]``); ``padding``
    is ``"VALID"``, ``"SAME"`` or (1-D and 2-D) a ``(begin, end)`` pair per spatial axis. 1-D runs as 2-D."""
    n = x.shape.rank - 2
    if n == 1:
        padding = padding if isinstance(padding, str) else [(0, 0), *padding]
        # the size-1 axis strides as the other: TF's depthwise kernel wants equal strides
        return _conv_last(x[:, None], w[:, :, None], strides * 2, [1, *dilations], group, padding)[:, 0]
    kernel = tf.transpose(w, [*range(2, n + 2), 1, 0])  # [*kernel, C / group, M]
    channels = x.shape[-1]
    if n == 2:
        padding = padding if isinstance(padding, str) else [[0, 0], *[list(p) for p in padding], [0, 0]]
        if group > 1 and group == channels and strides[0] == strides[1]:
            depthwise = tf.reshape(kernel, tf.concat([tf.shape(kernel)[:2], [channels, -1]], 0))
            return tf.nn.depthwise_conv2d(x, depthwise, [1, *strides, 1], padding, dilations=dilations)
        return tf.nn.conv2d(x, kernel, strides, padding, dilations=dilations)
    for axis, rate in enumerate(dilations):  # the Eigen Conv3D kernel has no dilations
        kernel = dilate(kernel, axis, rate)
    if group == 1:
        return tf.nn.convolution(x, kernel, strides, padding)
    xs, ks = tf.split(x, group, axis=-1), tf.split(kernel, group, axis=-1)
    return tf.concat([tf.nn.convolution(a, b, strides, padding) for a, b in zip(xs, ks, strict=True)], -1)


def _with_bias(y: tf.Tensor, bias: tf.Tensor | None) -> tf.Tensor:
    return y if bias is None else y + tf.reshape(bias, [-1] + [1] * (y.shape.rank - 2))


def convolve(node, x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    """ONNX Conv without bias: channels-first in and out."""
    n = x.shape.rank - 2
    kernel = list(node.attr("kernel_shape", w.shape[2:]))
    strides, dilations, pads = geometry(node, n, kernel)
    last = to_last(x)
    padding: str | list[tuple[Dim, Dim]]
    if auto_pad(node) == "SAME_UPPER":
        padding = "SAME"  # TF's SAME is ONNX's SAME_UPPER, on sizes unknown at trace time too
    else:
        padding = conv_pads(node, dims(x), kernel, strides, dilations, pads)
        if n > 2 or not all(isinstance(p, int) for pair in padding for p in pair):
            last, padding = pad_spatial(last, padding), "VALID"
    return to_first(_conv_last(last, w, strides, dilations, node.attr("group", 1), padding))


@op("Conv")
def _conv(node, x):
    data, w, bias = [*x, None][:3]
    return [_with_bias(convolve(node, data, w), bias)]


@op("ConvInteger")
def _conv_integer(node, x):
    data, w, x_zero, w_zero = [*x, None, None][:4]
    # float64 holds every sum of uint8/int8 products exactly (2**53); the result is int32, as ONNX says
    data = tf.cast(data, tf.float64) - (0.0 if x_zero is None else tf.cast(x_zero, tf.float64))
    w = tf.cast(w, tf.float64)
    if w_zero is not None:
        w_zero = tf.cast(w_zero, tf.float64)
        w -= tf.reshape(w_zero, [-1] + [1] * (w.shape.rank - 1)) if w_zero.shape.rank == 1 else w_zero
    return [tf.cast(convolve(node, data, w), tf.int32)]


def _transpose_ranges(node, sizes: list[Dim], full: list[Dim]) -> list[tuple[Dim, Dim]]:
    """Where the output lies in the uncropped output of a transposed convolution, ``full`` (``stride * (size
    - 1) + output_padding + (kernel - 1) * dilation + 1``): ``(begin, end)`` per spatial axis."""
    n, mode = len(sizes), auto_pad(node)
    shape = node.attr("output_shape")
    if shape is None and mode in ("SAME_UPPER", "SAME_LOWER"):
        shape = [size * s for size, s in zip(sizes, node.attr("strides", [1] * n), strict=True)]
    if shape is None:
        pads = [0] * 2 * n if mode == "VALID" else list(node.attr("pads", [0] * 2 * n))
        return [(pads[i], f - pads[i + n]) for i, f in enumerate(full)]
    ranges = []
    for f, target in zip(full, list(shape)[-n:], strict=True):
        total = maximum(f - target, 0)  # an output_shape past full: zeros at the end, as onnxruntime
        small = total // 2
        # ONNX's rule (and its reference): SAME_UPPER crops the odd pixel at the end, any other at the start
        begin = small if mode == "SAME_UPPER" else total - small
        ranges.append((begin, begin + target))
    return ranges


def _transpose_last(x: tf.Tensor, w: tf.Tensor, strides: list[int], full: list[Dim]) -> tf.Tensor:
    """Transposed convolution of a channels-last ``x`` with one group's ONNX weights ``[C, M, *kernel]``,
    output sizes ``full``."""
    n = x.shape.rank - 2
    kernel = tf.transpose(w, [*range(2, n + 2), 1, 0])  # [*kernel, M, C]
    shape = tf.stack([tf.shape(x)[0], *[tf.cast(f, tf.int32) for f in full], tf.shape(w)[1]])
    return tf.nn.conv_transpose(x, kernel, shape, strides, "VALID")


@op("ConvTranspose")
def _conv_transpose(node, x):
    data, w, bias = [*x, None][:3]
    n, group = data.shape.rank - 2, node.attr("group", 1)
    kernel = list(node.attr("kernel_shape", w.shape[2:]))
    strides, dilations, _ = geometry(node, n, kernel)
    out_pad = list(node.attr("output_padding", [0] * n))
    for axis, rate in enumerate(dilations):  # TF's CPU kernels have no dilations: zeros in the kernel
        w = dilate(w, axis + 2, rate)
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    sizes = dims(data)
    valid = [s * (size - 1) + k for size, s, k in zip(sizes, strides, span, strict=True)]
    full = [v + p for v, p in zip(valid, out_pad, strict=True)]
    last = to_last(data)
    if group == 1:
        y = _transpose_last(last, w, strides, valid)
    else:
        parts = zip(tf.split(last, group, -1), tf.split(w, group, 0), strict=True)
        y = tf.concat([_transpose_last(a, b, strides, valid) for a, b in parts], -1)
    y = crop(y, _transpose_ranges(node, sizes, full))
    return [_with_bias(to_first(y), bias)]


def _bilinear(planes: tf.Tensor, rows: tf.Tensor, cols: tf.Tensor, height: Dim, width: Dim) -> tf.Tensor:
    """``planes`` (``[N, G, C, H * W]``) sampled bilinearly at ``(rows, cols)`` (``[N, G, P]``, pixel
    coordinates), zero outside the image: ``[N, G, C, P]``."""
    top, left = tf.floor(rows), tf.floor(cols)
    dy, dx = rows - top, cols - left
    height, width = tf.cast(height, rows.dtype), tf.cast(width, rows.dtype)
    total = 0.0
    for y, wy in ((top, 1 - dy), (top + 1, dy)):
        for x, wx in ((left, 1 - dx), (left + 1, dx)):
            inside = (y >= 0) & (y < height) & (x >= 0) & (x < width)
            flat = tf.cast(tf.clip_by_value(y, 0, height - 1) * width + tf.clip_by_value(x, 0, width - 1), tf.int32)
            weight = tf.cast(tf.where(inside, wy * wx, tf.zeros_like(wy)), planes.dtype)
            total += tf.gather(planes, flat, axis=3, batch_dims=2) * weight[:, :, None]
    return total


@op("DeformConv")
def _deform_conv(node, x):
    data, w, offset, bias, mask = [*x, None, None][:5]
    if data.shape.rank != 4:
        raise ValueError(f"DeformConv is translated for 2-D images only, not rank {data.shape.rank}")
    kernel = list(node.attr("kernel_shape", w.shape[2:]))
    (stride_h, stride_w), (dil_h, dil_w), pads = geometry(node, 2, kernel)
    group, offset_group = node.attr("group", 1), node.attr("offset_group", 1)
    batch, channels, height, width = dims(data, 0)
    out_h, out_w = dims(offset)
    taps = kernel[0] * kernel[1]
    # sampling positions in float32 (float16 misplaces pixels past 2048)
    offset = tf.reshape(tf.cast(offset, tf.float32), tf.stack([batch, offset_group, taps, 2, out_h, out_w]))
    # each tap's position in the window, row-major over the kernel; each output pixel's window corner
    tap_h = tf.constant([i * dil_h for i in range(kernel[0]) for _ in range(kernel[1])], tf.float32)
    tap_w = tf.constant([j * dil_w for _ in range(kernel[0]) for j in range(kernel[1])], tf.float32)
    corner_h = tf.cast(tf.range(out_h) * stride_h - pads[0], tf.float32)
    corner_w = tf.cast(tf.range(out_w) * stride_w - pads[1], tf.float32)
    rows = offset[:, :, :, 0] + tap_h[:, None, None] + corner_h[:, None]  # [N, G, K, oh, ow]
    cols = offset[:, :, :, 1] + tap_w[:, None, None] + corner_w[None, :]
    flat = tf.stack([batch, offset_group, -1])
    planes = tf.reshape(data, tf.stack([batch, offset_group, channels // offset_group, -1]))
    sampled = _bilinear(planes, tf.reshape(rows, flat), tf.reshape(cols, flat), height, width)
    sampled = tf.reshape(sampled, tf.stack([batch, offset_group, channels // offset_group, taps, out_h, out_w]))
    if mask is not None:
        sampled *= tf.reshape(mask, tf.stack([batch, offset_group, 1, taps, out_h, out_w]))
    columns = tf.reshape(sampled, tf.stack([batch, group, -1, out_h * out_w]))  # [N, g, C / g * K, oh * ow]
    weights = tf.reshape(w, tf.stack([group, tf.shape(w)[0] // group, -1]))
    y = tf.einsum("gmk,ngkp->ngmp", weights, columns)
    return [_with_bias(tf.reshape(y, tf.stack([batch, -1, out_h, out_w])), bias)]
