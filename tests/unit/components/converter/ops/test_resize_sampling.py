"""Resize, Upsample, GridSample, RoiAlign, NonMaxSuppression and ImageDecoder on small ONNX graphs that ONNX's own
suite leaves out: an unknown batch dimension, scales/sizes/limits given at run time, older opsets, a float16
network; compared with onnxruntime or ONNX's reference evaluator."""

from __future__ import annotations

import io

import numpy as np
import onnx
import onnxruntime
import PIL.Image
import pytest
import tensorflow as tf
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from torchtfx.components.converter.translator import OnnxGraphModule

_ELEM = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.uint8): TensorProto.UINT8,
}


def _model(node, inputs: dict, constants: dict, opset: int, out_type=None) -> onnx.ModelProto:
    """One node; inputs of rank > 1 have an unknown batch dimension, ``constants`` are initializers."""
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(k, _ELEM[v.dtype], ["N", *v.shape[1:]] if v.ndim > 1 else list(v.shape))
            for k, v in inputs.items()
        ],
        [helper.make_tensor_value_info(node.output[0], out_type or _ELEM[next(iter(inputs.values())).dtype], None)],
        [numpy_helper.from_array(v, k) for k, v in constants.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _translated(model: onnx.ModelProto, inputs: dict, dtype=tf.float32) -> np.ndarray:
    module = OnnxGraphModule(model, compute_dtype=dtype, fuse=False)
    specs = [
        tf.TensorSpec([None, *v.shape[1:]] if v.ndim > 1 else v.shape, tf.as_dtype(v.dtype)) for v in inputs.values()
    ]
    traced = tf.function(lambda *xs: module(*xs), input_signature=specs, autograph=False)
    return np.asarray(traced(*inputs.values())[0])


def _expected(model: onnx.ModelProto, inputs: dict, reference: bool) -> np.ndarray:
    if reference:
        return ReferenceEvaluator(model).run(None, inputs)[0]
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)[0]


def _check(node, inputs, constants=None, opset=19, reference=False, atol=1e-5, out_type=None):
    model = _model(node, inputs, constants or {}, opset, out_type)
    want, got = _expected(model, inputs, reference), _translated(model, inputs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=atol)


def _f(*shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


@pytest.mark.parametrize(
    ("mode", "transform"), [("nearest", "half_pixel"), ("linear", "align_corners"), ("cubic", "asymmetric")]
)
def test_resize_constant_scales_leave_the_unknown_batch_alone(mode, transform):
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode=mode, coordinate_transformation_mode=transform)
    # align_corners over a fractional scale: onnxruntime divides by the integer output length, ONNX's reference
    # (and its backend tests) by the fractional one, scale * length.
    reference = transform == "align_corners"
    _check(node, {"x": _f(2, 3, 5, 7)}, {"s": np.array([1, 1, 1.6, 0.5], np.float32)}, reference=reference)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias_with_sizes_and_axes_given_at_run_time(mode):
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode, antialias=1, axes=[3, 2])
    _check(node, {"x": _f(2, 3, 9, 11), "sizes": np.array([4, 3], np.int64)}, reference=True)


def test_resize_keep_aspect_ratio_with_run_time_sizes():
    node = helper.make_node(
        "Resize", ["x", "", "", "sizes"], ["y"], mode="linear", axes=[2, 3], keep_aspect_ratio_policy="not_smaller"
    )
    _check(node, {"x": _f(2, 3, 6, 8), "sizes": np.array([5, 5], np.int64)})


def test_resize_tf_crop_and_resize_with_run_time_roi_extrapolates_outside():
    node = helper.make_node(
        "Resize",
        ["x", "roi", "", "sizes"],
        ["y"],
        mode="cubic",
        extrapolation_value=-7.0,
        coordinate_transformation_mode="tf_crop_and_resize",
    )
    roi = np.array([0, 0, -0.2, 0.1, 1, 1, 0.8, 1.3], np.float32)
    _check(node, {"x": _f(2, 3, 5, 6), "roi": roi, "sizes": np.array([2, 3, 4, 5], np.int64)})


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_10_and_upsample_use_asymmetric_coordinates(mode):
    scales = np.array([1, 1, 1.5, 2.5], np.float32)
    _check(helper.make_node("Resize", ["x", "s"], ["y"], mode=mode), {"x": _f(2, 3, 4, 5)}, {"s": scales}, opset=10)
    _check(helper.make_node("Upsample", ["x", "s"], ["y"], mode=mode), {"x": _f(2, 3, 4, 5)}, {"s": scales}, opset=9)
    node = helper.make_node("Upsample", ["x"], ["y"], mode=mode, scales=scales.tolist())
    _check(node, {"x": _f(2, 3, 4, 5)}, opset=7)


def test_resize_linear_on_uint8_truncates_as_the_reference():
    x = (np.random.default_rng(1).random((2, 3, 5, 7)) * 255).astype(np.uint8)
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")
    _check(node, {"x": x}, {"s": np.array([1, 1, 1.7, 0.6], np.float32)}, opset=13, reference=True)


def test_resize_in_a_float16_network():
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")
    inputs = {"x": _f(2, 3, 5, 6)}
    model = _model(node, inputs, {"s": np.array([1, 1, 2, 0.5], np.float32)}, 19)
    got = _translated(model, inputs, dtype=tf.float16)
    np.testing.assert_allclose(got, _expected(model, inputs, False), atol=2e-2)


@pytest.mark.parametrize(
    ("mode", "padding", "align"), [("bilinear", "zeros", 0), ("bicubic", "reflection", 1), ("nearest", "border", 1)]
)
def test_grid_sample_16_against_onnxruntime(mode, padding, align):
    grid = np.random.default_rng(1).uniform(-1.5, 1.5, (2, 4, 7, 2)).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding, align_corners=align)
    _check(node, {"x": _f(2, 3, 5, 6), "grid": grid}, opset=16)


def test_grid_sample_volumetric_reflection_and_in_a_float16_network():
    grid = np.random.default_rng(1).uniform(-1.5, 1.5, (2, 3, 4, 2, 3)).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear", padding_mode="reflection")
    inputs = {"x": _f(2, 3, 4, 5, 6), "grid": grid}
    _check(node, inputs, opset=20)
    model = _model(node, inputs, {}, 20)
    np.testing.assert_allclose(_translated(model, inputs, tf.float16), _expected(model, inputs, False), atol=2e-2)


@pytest.mark.parametrize(("mode", "ratio"), [("avg", 0), ("max", 2)])
def test_roi_align_adaptive_and_fixed_sampling(mode, ratio):
    rois = np.array([[0, 0, 5, 7], [1.3, 2.2, 11.7, 9.1], [-2, -1, 15, 13], [3, 3, 3.2, 3.1]], np.float32)
    node = helper.make_node(
        "RoiAlign",
        ["x", "rois", "batch"],
        ["y"],
        mode=mode,
        sampling_ratio=ratio,
        spatial_scale=0.5,
        output_height=3,
        output_width=4,
    )
    _check(node, {"x": _f(2, 4, 12, 14), "rois": rois, "batch": np.array([0, 1, 0, 1], np.int64)}, opset=16)


@pytest.mark.parametrize(("center", "limit"), [(0, 2**40), (1, 4)])
def test_non_max_suppression_per_class_with_a_run_time_limit_and_no_score_threshold(center, limit):
    rng = np.random.default_rng(0)
    centre, size = rng.random((2, 30, 2)) * 10, rng.random((2, 30, 2)) * 4 + 0.5
    boxes = np.concatenate([centre, size] if center else [centre - size / 2, centre + size / 2], -1)
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "limit", "iou"], ["y"], center_point_box=center)
    inputs = {
        "boxes": boxes.astype(np.float32),
        "scores": rng.random((2, 3, 30)).astype(np.float32),
        "limit": np.array([limit], np.int64),
        "iou": np.array([0.4], np.float32),
    }
    _check(node, inputs, opset=11, out_type=TensorProto.INT64)


def _encoded(image: np.ndarray, fmt: str) -> np.ndarray:
    buffer = io.BytesIO()
    PIL.Image.fromarray(image).save(buffer, format=fmt)
    return np.frombuffer(buffer.getvalue(), np.uint8)


@pytest.mark.parametrize(
    ("fmt", "pixel_format"), [("PNG", "Grayscale"), ("BMP", "BGR"), ("PPM", "RGB"), ("JPEG", "Grayscale")]
)
def test_image_decoder_formats_tf_reads_as_pillow(fmt, pixel_format):
    image = (np.random.default_rng(0).random((9, 13, 3)) * 255).astype(np.uint8)
    node = helper.make_node("ImageDecoder", ["data"], ["y"], pixel_format=pixel_format)
    _check(node, {"data": _encoded(image, fmt)}, opset=20, reference=True, atol=0)


def test_image_decoder_gif_and_grey_pgm_come_out_as_rgb():
    image = (np.random.default_rng(0).random((9, 13, 3)) * 255).astype(np.uint8)
    node = helper.make_node("ImageDecoder", ["data"], ["y"], pixel_format="RGB")
    for fmt, source in (("GIF", image), ("PPM", image[..., 0])):  # Pillow writes a 2-D image as binary PGM
        data = _encoded(source, fmt)
        got = _translated(_model(node, {"data": data}, {}, 20), {"data": data})
        np.testing.assert_array_equal(got, np.asarray(PIL.Image.open(io.BytesIO(data.tobytes())).convert("RGB")))
