"""Sampling at computed coordinates: GridSample, AffineGrid, NonMaxSuppression, ImageDecoder (ONNX semantics).

GridSample is separable like Resize: per spatial axis, a few taps (1 nearest, 2 linear, 4 cubic) with weights
and the padding mode applied to each tap's index, then one gather over the product of the axes' taps.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from torchtfx.components.converter.ops.registry import op, static


def _text(value, default: str) -> str:
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else str(value)


def _reflect(x: tf.Tensor, lo, hi) -> tf.Tensor:
    """Fold ``x`` into [lo, hi] by reflecting at the borders as often as needed (ONNX's GridSample)."""
    span = hi - lo
    below = x < lo
    dx = tf.where(below, lo - x, x - hi)
    folds = tf.floor(dx / tf.maximum(span, 1e-12))
    r = dx - folds * span
    even = tf.equal(tf.math.floormod(folds, 2.0), 0.0)
    low, high = lo + r, hi - r
    folded = tf.where(below, tf.where(even, low, high), tf.where(even, high, low))
    inside = tf.logical_not(below) & (x <= hi)
    return tf.where(inside, x, tf.where(span > 0, folded, tf.zeros_like(x) + lo))


def _cubic_weights(r: tf.Tensor, a: float = -0.75) -> tf.Tensor:
    """Keys' cubic convolution weights of the taps at -1, 0, 1, 2 for a fraction ``r`` in [0, 1)."""
    t = tf.stack([r + 1, r, 1 - r, 2 - r], axis=-1)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return tf.where(t <= 1.0, near, far)


def _grid_axis(coord: tf.Tensor, length: tf.Tensor, mode: str, padding: str, align: bool):
    """Source indices [..., taps] (int32) and weights of one spatial axis for normalized ``coord``."""
    d = tf.cast(length, coord.dtype)
    if align:
        x, lo, hi = (coord + 1) / 2 * (d - 1), tf.zeros_like(d), d - 1
    else:
        x, lo, hi = ((coord + 1) * d - 1) / 2, -0.5 + tf.zeros_like(d), d - 0.5
    if mode == "nearest":
        x = tf.round(x)  # half to even, as PyTorch's nearest
    if padding == "border":
        x = tf.where((x < lo) | (x > hi), tf.clip_by_value(x, 0.0, d - 1), x)
    elif padding == "reflection":
        x = _reflect(x, lo, hi)
    if mode == "nearest":
        taps, w = tf.floor(x)[..., None], tf.ones_like(x)[..., None]
    else:
        x0 = tf.floor(x)
        r = x - x0
        if mode == "linear":
            taps, w = x0[..., None] + tf.constant([0.0, 1.0], x.dtype), tf.stack([1 - r, r], axis=-1)
        else:
            taps, w = x0[..., None] + tf.constant([-1.0, 0.0, 1.0, 2.0], x.dtype), _cubic_weights(r)
    if padding == "zeros":
        w = tf.where((taps >= 0) & (taps < d), w, tf.zeros_like(w))
    elif padding == "reflection":
        taps = tf.floor(_reflect(taps, lo, hi))
    return tf.cast(tf.clip_by_value(taps, 0.0, d - 1), tf.int32), w


@op("GridSample")
def _grid_sample(node, x):
    data, grid = x[0], x[1]
    mode = _text(node.attr("mode"), "bilinear" if node.opset < 20 else "linear")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    padding, align = _text(node.attr("padding_mode"), "zeros"), bool(node.attr("align_corners", 0))
    if mode not in ("nearest", "linear", "cubic") or padding not in ("zeros", "border", "reflection"):
        raise ValueError(f"GridSample: unsupported mode {mode!r} or padding_mode {padding!r}")
    k = data.shape.rank - 2
    dims, grid_shape = tf.shape(data), tf.shape(grid)
    coords = tf.cast(grid, tf.float64 if data.dtype == tf.float64 else tf.float32)
    index, weight = None, None
    for i in range(k):  # the grid's last axis lists the coordinates innermost first: (x, y[, z])
        taps, w = _grid_axis(coords[..., k - 1 - i], dims[2 + i], mode, padding, align)
        expand = (Ellipsis,) + (None,) * i + (slice(None),)
        taps, w = taps[expand], w[expand]
        index = taps if index is None else index[..., None] * dims[2 + i] + taps
        weight = w if weight is None else weight[..., None] * w
    if index is None or weight is None:
        raise ValueError(f"GridSample needs an input with spatial axes, got rank {data.shape.rank}")
    n, c = dims[0], dims[1]
    flat = tf.transpose(tf.reshape(data, [n, c, -1]), [0, 2, 1])  # [N, prod(D), C]
    samples = tf.gather(flat, tf.reshape(index, [n, -1]), batch_dims=1)  # [N, P * taps, C]
    taps_total = int(np.prod(index.shape[-k:]))
    samples = tf.reshape(samples, [n, -1, taps_total, c])
    if mode != "nearest" or padding == "zeros":  # nearest's weights are ones, bar the zero padding
        w = tf.reshape(tf.cast(weight, data.dtype), [n, -1, taps_total, 1])
        samples = samples * w
    y = tf.transpose(tf.reduce_sum(samples, axis=2), [0, 2, 1])  # [N, C, P]
    return [tf.reshape(y, tf.concat([[n, c], grid_shape[1:-1]], 0))]


@op("AffineGrid")
def _affine_grid(node, x):
    theta, size = x[0], x[1]
    k = theta.shape[1] if theta.shape[1] is not None else size.shape[0] - 2
    value = static(size)
    dims = [int(d) for d in value[2:]] if value is not None else tf.unstack(tf.cast(size[2:], tf.int32), num=k)
    align = bool(node.attr("align_corners", 0))
    bases = []
    for d in dims:
        i = tf.cast(tf.range(d), tf.float64)
        n = tf.cast(d, tf.float64)
        base = 2 * i / tf.maximum(n - 1, 1.0) - 1 if align else (2 * i + 1) / n - 1
        bases.append(tf.where(n > 1, base, tf.zeros_like(base)))  # one step: the centre, as PyTorch
    mesh = tf.meshgrid(*bases, indexing="ij")
    homogeneous = tf.stack([*mesh[::-1], tf.ones_like(mesh[0])], axis=-1)  # (x, y[, z], 1) per point
    points = tf.cast(tf.reshape(homogeneous, [-1, k + 1]), theta.dtype)
    grid = tf.einsum("pj,nij->npi", points, theta)
    shape = tf.concat([tf.shape(theta)[:1], tf.stack(dims) if value is None else dims, [k]], 0)
    return [tf.reshape(grid, shape)]


def _roi_axis(c: tf.Tensor, size: tf.Tensor):
    """RoiAlign's bilinear taps along one axis, as ONNX's reference: a sample beyond [-1, size] counts 0, one
    in [-1, 0) is moved to 0, one past the last pixel takes the last pixel."""
    valid = (c >= -1.0) & (c <= size)
    c = tf.maximum(c, 0.0)
    low = tf.floor(c)
    end = low >= size - 1
    low = tf.where(end, size - 1, low)
    frac = tf.where(end, tf.zeros_like(c), c - low)
    high = tf.where(end, low, low + 1)
    zero = tf.zeros_like(c)
    return [
        (tf.cast(low, tf.int32), tf.where(valid, 1 - frac, zero)),
        (tf.cast(high, tf.int32), tf.where(valid, frac, zero)),
    ]


def _roi_samples(start, bin_size, grid, count: int, steps):
    """Sample coordinates [R, count, steps] (``steps`` points per bin) and which of them each ROI uses (its
    ``grid``: the sampling ratio, or one per pixel of its bins)."""
    start, bin_size, grid = start[:, None, None], bin_size[:, None, None], grid[:, None, None]
    b = tf.range(count, dtype=start.dtype)[None, :, None]
    i = tf.cast(tf.range(steps), start.dtype)[None, None, :]
    return start + b * bin_size + (i + 0.5) * bin_size / tf.maximum(grid, 1.0), i < grid


@op("RoiAlign")
def _roi_align(node, x):
    data, rois, batch = x
    dtype = tf.float64 if data.dtype == tf.float64 else tf.float32
    half = _text(node.attr("coordinate_transformation_mode"), "half_pixel" if node.opset >= 16 else "output_half_pixel")
    oh, ow, ratio = node.attr("output_height", 1), node.attr("output_width", 1), node.attr("sampling_ratio", 0)
    box = tf.cast(rois, dtype) * node.attr("spatial_scale", 1.0) - (0.5 if half == "half_pixel" else 0.0)
    start_w, start_h, end_w, end_h = tf.unstack(box, num=4, axis=1)
    size_h, size_w = end_h - start_h, end_w - start_w
    if half != "half_pixel":
        size_h, size_w = tf.maximum(size_h, 1.0), tf.maximum(size_w, 1.0)
    grid_h = tf.fill(tf.shape(size_h), float(ratio)) if ratio > 0 else tf.math.ceil(size_h / oh)
    grid_w = tf.fill(tf.shape(size_w), float(ratio)) if ratio > 0 else tf.math.ceil(size_w / ow)
    steps_h = ratio if ratio > 0 else tf.maximum(tf.cast(tf.reduce_max(grid_h), tf.int32), 1)
    steps_w = ratio if ratio > 0 else tf.maximum(tf.cast(tf.reduce_max(grid_w), tf.int32), 1)
    ys, use_y = _roi_samples(start_h, size_h / oh, grid_h, oh, steps_h)  # [R, oh, gh]
    xs, use_x = _roi_samples(start_w, size_w / ow, grid_w, ow, steps_w)  # [R, ow, gw]
    shape = tf.shape(data)
    height, width = tf.cast(shape[2], dtype), tf.cast(shape[3], dtype)
    pixels = tf.reshape(tf.transpose(data, [0, 2, 3, 1]), [-1, shape[1]])  # [N*H*W, C]
    base = tf.cast(batch, tf.int32)[:, None, None, None, None] * shape[2] * shape[3]
    corners = []
    for iy, wy in _roi_axis(ys, height):
        for ix, wx in _roi_axis(xs, width):
            index = base + iy[:, :, :, None, None] * shape[3] + ix[:, None, None, :, :]  # [R, oh, gh, ow, gw]
            weight = tf.cast(wy[:, :, :, None, None] * wx[:, None, None, :, :], data.dtype)
            corners.append(tf.gather(pixels, index) * weight[..., None])
    used = (use_y[:, :, :, None, None] & use_x[:, None, None, :, :])[..., None]
    if _text(node.attr("mode"), "avg") == "max":  # the largest weighted corner of any sample, as the reference
        best = tf.reduce_max(tf.where(used, tf.reduce_max(tf.stack(corners), 0), tf.cast(-np.inf, data.dtype)), [2, 4])
        y = tf.where((grid_h * grid_w > 0)[:, None, None, None], best, tf.zeros_like(best))  # no sample: 0
    else:
        count = tf.cast(tf.maximum(grid_h * grid_w, 1.0), data.dtype)[:, None, None, None]
        y = tf.reduce_sum(tf.where(used, tf.add_n(corners), tf.zeros_like(corners[0])), [2, 4]) / count
    return [tf.transpose(y, [0, 3, 1, 2])]


@op("NonMaxSuppression")
def _non_max_suppression(node, x):
    boxes, scores = tf.cast(x[0], tf.float32), tf.cast(x[1], tf.float32)
    limit, iou, threshold = ([*x, None, None, None])[2:5]
    if limit is None or limit.shape.num_elements() == 0:
        return [tf.zeros([0, 3], tf.int64)]
    if node.attr("center_point_box", 0):
        centre, half = boxes[..., :2], boxes[..., 2:] / 2
        boxes = tf.gather(tf.concat([centre - half, centre + half], axis=-1), [1, 0, 3, 2], axis=-1)
    iou = tf.zeros([]) if iou is None else tf.reshape(tf.cast(iou, tf.float32), [])
    no_threshold = threshold is None or threshold.shape.num_elements() == 0
    threshold = tf.constant(-np.inf) if no_threshold else tf.reshape(tf.cast(threshold, tf.float32), [])
    shape = tf.shape(scores)
    batches, classes, count = shape[0], shape[1], shape[2]
    most = tf.cast(tf.clip_by_value(tf.reshape(limit, []), 0, tf.cast(count, limit.dtype)), tf.int32)
    flat_boxes = tf.reshape(tf.repeat(boxes, classes, axis=0), [-1, count, 4])

    def one(args):
        selected, valid = tf.raw_ops.NonMaxSuppressionV4(
            boxes=args[0],
            scores=args[1],
            max_output_size=most,
            iou_threshold=iou,
            score_threshold=threshold,
            pad_to_max_output_size=True,
        )
        return selected, valid

    signature = (tf.TensorSpec([None], tf.int32), tf.TensorSpec([], tf.int32))
    selected, valid = tf.map_fn(one, (flat_boxes, tf.reshape(scores, [-1, count])), fn_output_signature=signature)
    keep = tf.range(most)[None, :] < valid[:, None]
    pair = tf.range(batches * classes)
    pair = tf.broadcast_to(pair[:, None], tf.shape(selected))
    rows = tf.stack([pair // classes, pair % classes, selected], axis=-1)
    return [tf.cast(tf.boolean_mask(rows, keep), tf.int64)]


_BYTES = [bytes([i]) for i in range(256)]
_ASCII = [bytes([i]) if i < 128 else b"?" for i in range(256)]  # a header's text, the binary data masked
_SPACE = r"(?:\s|#[^\n]*\n)+"  # PNM separates header fields by whitespace and comments
_PNM = rf"^(P[56]{_SPACE}(\d+){_SPACE}(\d+){_SPACE}(25[0-5]|2[0-4]\d|1?\d?\d)\s)(?s:.*)$"  # maxval < 256


def _pnm(raw: tf.Tensor, header: tf.Tensor) -> tf.Tensor:
    """A binary 8-bit PPM (P6) or PGM (P5) image as RGB: TF has no decoder for it, but it is raw pixels."""
    fields = tf.strings.to_number(tf.strings.split(tf.strings.regex_replace(header, _PNM, r"\2 \3")), tf.int32)
    offset = tf.strings.length(tf.strings.regex_replace(header, _PNM, r"\1"))
    channels = tf.where(tf.equal(raw[1], ord("6")), 3, 1)
    pixels = raw[offset : offset + fields[0] * fields[1] * channels]
    image = tf.reshape(pixels, tf.stack([fields[1], fields[0], channels]))
    return tf.tile(image, tf.stack([1, 1, 4 - channels]))


@op("ImageDecoder")
def _image_decoder(node, x):
    # The encoded bytes arrive as a uint8 tensor: join them into one string through a table of the 256 bytes.
    raw = tf.reshape(x[0], [-1])
    encoded = tf.strings.reduce_join(tf.gather(tf.constant(_BYTES), tf.cast(raw, tf.int32)))
    header = tf.strings.reduce_join(tf.gather(tf.constant(_ASCII), tf.cast(raw[:256], tf.int32)))
    pixel_format = _text(node.attr("pixel_format"), "RGB")
    if pixel_format not in ("RGB", "BGR", "Grayscale"):
        raise ValueError(f"ImageDecoder: unsupported pixel_format {pixel_format!r}")
    # JPEG with libjpeg's accurate integer DCT, as Pillow (the reference) decodes it: the default differs by up
    # to 4 levels. TF decodes JPEG, PNG, GIF and BMP; 8-bit binary PNM is read here; others fail at run time.
    image = tf.case(
        [
            (tf.io.is_jpeg(encoded), lambda: tf.io.decode_jpeg(encoded, channels=3, dct_method="INTEGER_ACCURATE")),
            (tf.strings.regex_full_match(header, _PNM), lambda: _pnm(raw, header)),
        ],
        default=lambda: tf.io.decode_image(encoded, channels=3, dtype=tf.uint8, expand_animations=False),
    )
    if pixel_format == "RGB":
        return [image]
    if pixel_format == "BGR":
        return [image[..., ::-1]]
    # Pillow's convert("L"): ITU-R 601-2 luma in 16-bit fixed point, rounded.
    luma = tf.reduce_sum(tf.cast(image, tf.int32) * tf.constant([19595, 38470, 7471]), -1, keepdims=True)
    return [tf.cast(tf.bitwise.right_shift(luma + 0x8000, 16), tf.uint8)]
