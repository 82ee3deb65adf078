"""Resize and Upsample by ONNX semantics (opsets 7-22), as separable interpolation.

Each resized axis is done on its own: the source coordinate of every output index comes from the coordinate
transformation, then the input is gathered at a few taps around it along that axis and the taps are summed
with their weights (1 tap for nearest, 2 for linear, 4 for cubic, more for an antialiased downscale). This is
exact by ONNX's reference (``onnx/reference/ops/op_resize.py``), which tf.image.resize is not for most modes.
Coordinates and weights are computed in float64, as the reference does; scales and sizes may arrive at run time.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import tensorflow as tf

from torchtfx.components.converter.ops.registry import op, static

_F64 = tf.float64


def _text(value, default: str) -> str:
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclasses.dataclass
class _Spec:
    mode: str = "nearest"  # nearest | linear | cubic
    transform: str = "half_pixel"
    nearest: str = "round_prefer_floor"  # or "simple": Resize-10 and Upsample (floor, ceil when downscaling)
    cubic_a: float = -0.75
    exclude_outside: bool = False
    antialias: bool = False
    extrapolation: float = 0.0
    policy: str = "stretch"

    @classmethod
    def of(cls, node) -> _Spec:
        mode = _text(node.attr("mode"), "nearest")
        mode = {"bilinear": "linear", "trilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
        if node.op_type == "Upsample" or node.opset < 11:
            return cls(mode=mode, transform="asymmetric", nearest="simple")
        return cls(
            mode=mode,
            transform=_text(node.attr("coordinate_transformation_mode"), "half_pixel"),
            nearest=_text(node.attr("nearest_mode"), "round_prefer_floor"),
            cubic_a=float(node.attr("cubic_coeff_a", -0.75)),
            exclude_outside=bool(node.attr("exclude_outside", 0)),
            antialias=bool(node.attr("antialias", 0)),
            extrapolation=float(node.attr("extrapolation_value", 0.0)),
            policy=_text(node.attr("keep_aspect_ratio_policy"), "stretch"),
        )


def _given(t) -> bool:
    """Whether an optional input holds values (opset 11-12 pass an empty tensor for the unused one)."""
    return t is not None and t.shape.num_elements() != 0


def _targets(x: tf.Tensor, axes: list[int], scales, sizes, policy: str) -> tuple[list, list]:
    """Per resized axis, the output length and the scale the coordinate transformation uses: python numbers
    where they are known at trace time, scalar tensors otherwise."""
    if scales is None and sizes is None:
        raise ValueError("Resize needs scales or sizes")
    values = static(sizes if sizes is not None else scales)
    dims = [x.shape[a] for a in axes]
    if values is not None and sizes is not None and policy != "stretch" and None not in dims:
        ratio = np.asarray(values, np.float64).reshape(-1) / np.asarray(dims, np.float64)
        s = float(ratio.min() if policy == "not_larger" else ratio.max())
        return [int(np.floor(s * n + 0.5)) for n in dims], [s] * len(axes)
    if values is not None and (sizes is None or policy == "stretch"):
        out, scale = [], []
        for a, v in zip(axes, np.asarray(values, np.float64).reshape(-1), strict=True):
            n = x.shape[a]
            if n is None:
                length = tf.cast(tf.shape(x)[a], _F64)
                out.append(tf.cast(tf.floor(v * length), tf.int32) if sizes is None else int(v))
                scale.append(float(v) if sizes is None else v / length)
            else:
                out.append(int(np.floor(v * n)) if sizes is None else int(v))
                scale.append(float(v) if sizes is None else float(v / n))
        return out, scale
    n = tf.cast(tf.gather(tf.shape(x), axes), _F64)
    v = tf.reshape(tf.cast(sizes if sizes is not None else scales, _F64), [-1])
    if sizes is None:
        out, scale = tf.floor(v * n), v
    elif policy == "stretch":
        out, scale = v, v / n
    else:
        s = (tf.reduce_min if policy == "not_larger" else tf.reduce_max)(v / n)
        out, scale = tf.floor(s * n + 0.5), tf.fill([len(axes)], s)
    out = tf.cast(out, tf.int32)
    return [out[i] for i in range(len(axes))], [scale[i] for i in range(len(axes))]


def _coords(spec: _Spec, out, length, scale, roi) -> tf.Tensor:
    """The source coordinate (float64) of every output index along one axis."""
    x = tf.cast(tf.range(out), _F64)
    n, s = tf.cast(length, _F64), tf.cast(scale, _F64)
    width = s * n  # the reference's fractional output width
    mode = spec.transform
    if mode == "asymmetric":
        return x / s
    if mode == "align_corners":
        return tf.where(tf.equal(width, 1.0), tf.zeros_like(x), x * (n - 1) / (width - 1))
    if mode == "tf_crop_and_resize":
        start, end = (tf.cast(r, _F64) for r in roi)
        inner = x * (end - start) * (n - 1) / (width - 1)
        centre = tf.fill(tf.shape(x), (end - start) * (n - 1) / 2)
        return tf.where(tf.equal(width, 1.0), centre, inner) + start * (n - 1)
    half = (x + 0.5) / s - 0.5
    if mode == "pytorch_half_pixel":  # one output: 0 by the operator's text and onnxruntime (the reference: -0.5)
        return tf.where(tf.cast(out, tf.int32) > 1, half, tf.zeros_like(x))
    if mode == "half_pixel_symmetric":
        return n / 2 * (1 - tf.cast(out, _F64) / width) + half
    if mode == "half_pixel":
        return half
    raise ValueError(f"Resize: unsupported coordinate_transformation_mode {mode!r}")


def _nearest(spec: _Spec, c: tf.Tensor, scale) -> tf.Tensor:
    floor = tf.floor(c)
    frac = c - floor
    if spec.nearest == "round_prefer_floor":
        return floor + tf.cast(frac > 0.5, _F64)
    if spec.nearest == "round_prefer_ceil":
        return floor + tf.cast(frac >= 0.5, _F64)
    if spec.nearest == "floor":
        return floor
    if spec.nearest == "ceil":
        return tf.math.ceil(c)
    if spec.nearest == "simple":
        return tf.where(tf.cast(scale, _F64) < 1.0, tf.math.ceil(c), floor)
    raise ValueError(f"Resize: unsupported nearest_mode {spec.nearest!r}")


def _kernel(spec: _Spec, t: tf.Tensor) -> tf.Tensor:
    t = tf.abs(t)
    if spec.mode == "linear":
        return tf.maximum(1.0 - t, 0.0)
    a = spec.cubic_a
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return tf.where(t <= 1.0, near, tf.where(t < 2.0, far, tf.zeros_like(t)))


def _taps(spec: _Spec, c: tf.Tensor, length, scale) -> tuple[tf.Tensor, tf.Tensor]:
    """Source indices [out, taps] (clamped: the reference pads by repeating the edge) and their weights."""
    support = 1.0 if spec.mode == "linear" else 2.0
    if not spec.antialias:
        s = 1.0
    elif isinstance(scale, float):
        s = min(scale, 1.0)
    else:
        s = tf.minimum(tf.cast(scale, _F64), 1.0)
    start = math.floor(-support / s) + 1 if isinstance(s, float) else tf.floor(-support / s) + 1
    offsets = tf.range(start, 2 - start, dtype=_F64)  # the reference's 2 - 2 * start taps
    base = tf.math.ceil(c) - 1  # the reference's neighbours: ratio = c - base lies in (0, 1]
    j = base[:, None] + offsets[None, :]
    w = _kernel(spec, (j - c[:, None]) * s)
    n = tf.cast(length, _F64)
    if spec.exclude_outside:
        w = tf.where((j >= 0) & (j < n), w, tf.zeros_like(w))
    w = w / tf.reduce_sum(w, axis=1, keepdims=True)
    return tf.cast(tf.clip_by_value(j, 0.0, n - 1), tf.int32), w


def _resize_axis(spec: _Spec, y: tf.Tensor, axis: int, c: tf.Tensor, length, scale) -> tf.Tensor:
    if spec.mode == "nearest":
        idx = tf.clip_by_value(_nearest(spec, c, scale), 0.0, tf.cast(length, _F64) - 1)
        return tf.gather(y, tf.cast(idx, tf.int32), axis=axis)
    if spec.mode not in ("linear", "cubic"):
        raise ValueError(f"Resize: unsupported mode {spec.mode!r}")
    idx, w = _taps(spec, c, length, scale)
    w = tf.cast(w, y.dtype)[(slice(None), slice(None)) + (None,) * (y.shape.rank - axis - 1)]
    return tf.reduce_sum(tf.gather(y, idx, axis=axis) * w, axis=axis + 1)


def _rois(roi, rank: int, axes: list[int], spec: _Spec) -> list:
    if spec.transform != "tf_crop_and_resize":
        return [None] * len(axes)
    if not _given(roi):
        raise ValueError("Resize: tf_crop_and_resize needs the roi input")
    k = len(axes) if roi.shape[0] == 2 * len(axes) else rank
    value = static(roi)
    r = [float(v) for v in value] if value is not None else tf.unstack(tf.cast(roi, _F64), num=2 * k)
    return [(r[i], r[i + k]) if k == len(axes) else (r[a], r[a + k]) for i, a in enumerate(axes)]


def _resize(spec: _Spec, x: tf.Tensor, roi, scales, sizes, axes: list[int] | None) -> tf.Tensor:
    rank = x.shape.rank
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    out, scale = _targets(x, axes, scales, sizes, spec.policy)
    rois = _rois(roi, rank, axes, spec)
    y = x if x.dtype.is_floating or spec.mode == "nearest" else tf.cast(x, _F64)  # truncated back, as the reference
    valid = None
    for axis, o, s, r in zip(axes, out, scale, rois, strict=True):
        length = x.shape[axis] if x.shape[axis] is not None else tf.shape(x)[axis]
        if r is None and isinstance(s, float) and s == 1.0:
            continue  # the identity, whatever the mode
        c = _coords(spec, o, length, s, r)
        if r is None and not isinstance(s, float):  # a scale known at run time only: skip its identity there
            resized = functools.partial(_resize_axis, spec, y, axis, c, length, s)
            y = tf.cond(tf.equal(tf.cast(s, _F64), 1.0), functools.partial(tf.identity, y), resized)
        else:
            y = _resize_axis(spec, y, axis, c, length, s)
        if r is not None:
            inside = (c >= 0) & (c <= tf.cast(length, _F64) - 1)
            inside = tf.reshape(inside, [-1] + [1] * (rank - axis - 1))
            valid = inside if valid is None else valid & inside
    if valid is not None:
        y = tf.where(valid, y, tf.cast(spec.extrapolation, y.dtype))
    return y if y.dtype == x.dtype else tf.saturate_cast(y, x.dtype)


@op("Resize")
def _resize_op(node, x):
    if node.opset < 11:  # Resize-10: (X, scales)
        return [_resize(_Spec.of(node), x[0], None, x[1], None, None)]
    data, roi, scales, sizes = ([*x, None, None, None])[:4]
    axes = node.attr("axes")
    use_sizes = _given(sizes)
    return [_resize(_Spec.of(node), data, roi, None if use_sizes else scales, sizes if use_sizes else None, axes)]


@op("Upsample")
def _upsample(node, x):
    scales = x[1] if len(x) > 1 and x[1] is not None else node.constant(np.asarray(node.attr("scales"), np.float32))
    return [_resize(_Spec.of(node), x[0], None, scales, None, None)]
