"""Any ONNX file to a TF SavedModel (``torchtfx convert model.onnx OUT_DIR``), proved against onnxruntime.

The SavedModel's ``serving_default`` signature takes the ONNX graph's inputs by name (a dimension the graph
leaves symbolic stays unknown, so batch and sequence length are both free) and returns its outputs by name. The
saved model is loaded back and run next to onnxruntime on the given inputs, or on random ones at two sizes of
every symbolic dimension, and the largest difference per output is reported.

It is written to a staging folder beside ``OUT_DIR`` and renamed into place only once it is saved and its parity
measured: a model that does not convert (an unreadable file, a graph onnxruntime or TensorFlow cannot run)
leaves no ``OUT_DIR`` that looks complete, and raises :class:`ConversionError` in one line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import tensorflow as tf
from onnx import TensorProto

from torchtfx.components.converter import model_file, repairs
from torchtfx.components.converter.ops.registry import DTYPES
from torchtfx.components.converter.translator import ConversionError, OnnxGraphModule

logger = logging.getLogger(__name__)

SIGNATURE = "serving_default"
# Sizes given to every symbolic dimension when no inputs are given: two, so that a size baked at export shows.
RANDOM_DIM_SIZES = (3, 1)


@dataclasses.dataclass(frozen=True)
class OutputParity:
    name: str
    max_abs_diff: float
    max_rel_diff: float  # |diff| / max(|onnxruntime|, 1)


@dataclasses.dataclass(frozen=True)
class ConversionReport:
    out_dir: str
    repairs: tuple[str, ...]
    parity: tuple[OutputParity, ...]  # the worst over every input set

    @property
    def max_rel_diff(self) -> float:
        return max((p.max_rel_diff for p in self.parity), default=0.0)

    def describe(self) -> str:
        lines = [f"SavedModel written to {self.out_dir} (signature {SIGNATURE!r})"]
        lines += [
            f"  parity vs onnxruntime, {p.name}: max |diff| {p.max_abs_diff:.3g}, relative {p.max_rel_diff:.3g}"
            for p in self.parity
        ]
        if self.repairs:
            lines.append(f"  graph repairs: {', '.join(self.repairs)}")
        return "\n".join(lines)


def _signature_name(name: str) -> str:
    """An ONNX value name as a TF signature key (letters, digits, ``_``; not starting with a digit)."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", name) or "input"
    return cleaned if not cleaned[0].isdigit() else f"_{cleaned}"


def input_specs(graph: onnx.GraphProto, inputs: list[str]) -> list[tf.TensorSpec]:
    """A ``tf.function`` input signature for the graph's ``inputs``: declared dtypes, fixed dimensions kept and
    symbolic ones (a dynamic batch or length) left open."""
    by_name = {v.name: v for v in graph.input}
    specs = []
    for name in inputs:
        tensor = by_name[name].type.tensor_type
        if tensor.elem_type not in DTYPES:
            raise ConversionError(
                f"input {name!r} has ONNX type {TensorProto.DataType.Name(tensor.elem_type)}, "
                "which the converter does not take"
            )
        shape = (
            [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
            if tensor.HasField("shape")
            else None
        )
        specs.append(tf.TensorSpec(shape, DTYPES[tensor.elem_type], name=_signature_name(name)))
    return specs


def build(model: onnx.ModelProto, float16: bool = False) -> tuple[tf.Module, tuple[str, ...]]:
    """The module to save, with its ``serving_default`` function, and the repairs that fired."""
    model, fired = repairs.apply_graph_repairs(model)
    network = OnnxGraphModule(model, compute_dtype=tf.float16 if float16 else tf.float32)
    module = tf.Module()
    module.network = network  # tracked: its weights are saved with the SavedModel
    specs = input_specs(model.graph, network.input_names)
    keys = [_signature_name(o.name) for o in model.graph.output]

    def serve(*args):
        return dict(zip(keys, network(*args), strict=True))

    module.serve = tf.function(serve, input_signature=specs, autograph=False)
    return module, fired


def convert(
    onnx_path: Path, out_dir: Path, inputs: dict[str, np.ndarray] | None = None, float16: bool = False, seed: int = 0
) -> ConversionReport:
    """Write the SavedModel of ``onnx_path`` to ``out_dir`` and measure it against onnxruntime; ``out_dir``
    appears only when both finished (:class:`ConversionError` otherwise)."""
    _check_out_dir(out_dir)
    model = model_file.load(onnx_path)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".partial", dir=out_dir.parent))
    try:
        with _failing_as("translating the graph", _TF_ERRORS):
            module, fired = build(model, float16)
        with _failing_as("saving the SavedModel", _TF_ERRORS):
            tf.saved_model.save(module, str(staging), signatures={SIGNATURE: module.serve.get_concrete_function()})
        feeds = [inputs] if inputs is not None else random_inputs(model, seed)
        parity = _parity(onnx_path, str(staging), model, feeds)
        _publish(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    report = ConversionReport(str(out_dir), fired, parity)
    logger.debug("%s", report.describe())
    return report


# Raised by TensorFlow while tracing or running a graph it cannot compute (shapes, dtypes, allocation).
_TF_ERRORS = (tf.errors.OpError, ValueError, TypeError, MemoryError, RecursionError)


def _runtime_errors() -> tuple[type[BaseException], ...]:
    """onnxruntime's exceptions (each derives from Exception only) and the MemoryError of a failed allocation."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    names = (
        "Fail",
        "RuntimeException",
        "InvalidArgument",
        "InvalidGraph",
        "InvalidProtobuf",
        "NoSuchFile",
        "NotImplemented",
        "EPFail",
        "ModelLoaded",
        "EngineError",
    )
    return (MemoryError, *(getattr(state, n) for n in names if isinstance(getattr(state, n, None), type)))


@contextlib.contextmanager
def _failing_as(stage: str, errors: tuple[type[BaseException], ...], fix: str = "") -> Iterator[None]:
    """``errors`` raised meanwhile become one-line :class:`ConversionError`s naming ``stage``."""
    try:
        yield
    except ConversionError:
        raise
    except errors as err:
        text = re.sub(r"/onnxruntime_src/\S+:\d+ (\S+ )?\S*onnxruntime::\S*?\([^)]*\)\S* ", "", str(err))
        first = " ".join(text.split())[:400] or type(err).__name__
        fix = fix or (
            "the graph is outside what the converter can build; report it with the model, or rewrite "
            "the part named above"
        )
        raise ConversionError(
            f"the model does not convert: {stage} failed: {type(err).__name__}: {first}. "
            f"Fix: {fix}. Nothing was written"
        ) from None


def _check_out_dir(out_dir: Path) -> None:
    """Refuse, before any work, an ``out_dir`` that holds something other than an earlier SavedModel."""
    if out_dir.exists() and not (
        out_dir.is_dir() and (not any(out_dir.iterdir()) or (out_dir / "saved_model.pb").is_file())
    ):
        raise ConversionError(
            f"{out_dir} exists and is not a SavedModel folder; convert replaces only an earlier "
            "SavedModel. Fix: name a new folder, or remove that one"
        )


def _publish(staging: Path, out_dir: Path) -> None:
    """``staging`` becomes ``out_dir``; an earlier SavedModel there is replaced (moved aside, then removed)."""
    if not out_dir.exists():
        staging.rename(out_dir)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".old", dir=out_dir.parent))
    out_dir.rename(old / "saved")
    staging.rename(out_dir)
    shutil.rmtree(old, ignore_errors=True)


def random_inputs(model: onnx.ModelProto, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """One input set per size in :data:`RANDOM_DIM_SIZES` for every symbolic dimension; floats normal, ints in
    [0, 2) (valid ids for any table), booleans at random."""
    initializers = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(seed)
    sets = []
    for size in RANDOM_DIM_SIZES:
        feed = {}
        for value in model.graph.input:
            if value.name in initializers:
                continue
            tensor = value.type.tensor_type
            shape = [d.dim_value if d.HasField("dim_value") else size for d in tensor.shape.dim]
            dtype = DTYPES[tensor.elem_type].as_numpy_dtype
            if np.issubdtype(dtype, np.floating):
                feed[value.name] = rng.normal(size=shape).astype(dtype)
            elif dtype == np.bool_:
                feed[value.name] = rng.integers(0, 2, shape).astype(bool)
            else:
                feed[value.name] = rng.integers(0, 2, shape).astype(dtype)
        sets.append(feed)
    return sets


def _parity(onnx_path: Path, saved: str, model: onnx.ModelProto, feeds: list[dict]) -> tuple[OutputParity, ...]:
    import onnxruntime as ort

    ort_errors = _runtime_errors()
    with _failing_as("loading the model in onnxruntime", ort_errors, _ORT_FIX):
        options = ort.SessionOptions()
        options.log_severity_level = 4  # its failure is raised, in one line: not printed again by its logger
        session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    with _failing_as("loading the SavedModel back", _TF_ERRORS):
        serve = tf.saved_model.load(saved).signatures[SIGNATURE]
    names = [o.name for o in model.graph.output]
    worst = {n: (0.0, 0.0) for n in names}
    for feed in feeds:
        shapes = ", ".join(f"{k}{list(np.shape(v))}" for k, v in feed.items())
        with _failing_as(f"running onnxruntime on inputs {shapes}", ort_errors, _ORT_FIX):
            want = session.run(names, feed)
        with _failing_as(f"running the SavedModel on inputs {shapes}", _TF_ERRORS):
            got = serve(**{_signature_name(k): tf.constant(v) for k, v in feed.items()})
        for name, expected in zip(names, want, strict=True):
            actual = got[_signature_name(name)].numpy()
            diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64)) if expected.size else np.zeros(1)
            rel = diff / np.maximum(np.abs(expected.astype(np.float64)), 1.0) if expected.size else diff
            worst[name] = (max(worst[name][0], float(np.max(diff))), max(worst[name][1], float(np.max(rel))))
    return tuple(OutputParity(n, *worst[n]) for n in names)


_ORT_FIX = (
    "the ONNX model itself does not run at these input shapes (onnxruntime is the reference): export it "
    "again, or give inputs it runs on with --inputs"
)
