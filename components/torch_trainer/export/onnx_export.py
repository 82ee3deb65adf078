"""ONNX export of the trained network (legacy TorchScript exporter), with its dynamic batch verified.

``dynamo=False``: the dynamo exporter needs onnxscript, whose ml_dtypes conflicts with TF 2.16. Torch ops the
legacy exporter lacks are written by :mod:`.symbolics`; the eval-mode fast paths of ``nn.MultiheadAttention`` and
``nn.TransformerEncoderLayer`` (fused kernels such as ``aten::_transformer_encoder_layer_fwd``, which no exporter
writes) are turned off for the export. A model that still cannot be exported stops with the torch op, the module
path and the user's source line (:mod:`.export_failure`); one whose eval output is random, with the module that
draws (:mod:`..modeling.determinism`).

The legacy exporter traces one batch; research code that reads the batch size as a Python int (``len(x)``,
``int(x.shape[0])``) bakes that number into ``Reshape``/``Expand`` shapes, so the graph declares a dynamic
batch axis and fails at any other size. The export is therefore run in onnxruntime at batch sizes other
than the trace batch and, when it fails there, repaired (:mod:`.repairs`, ``batch_constants``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

from torchtfx.components.converter import repairs
from torchtfx.components.torch_trainer.export import symbolics
from torchtfx.components.torch_trainer.export.dynamo_export import DynamoExportError, ModelRecipe, export_with_dynamo
from torchtfx.components.torch_trainer.export.export_failure import explain, quiet_exporter
from torchtfx.components.torch_trainer.features import CATEGORICAL_INPUT, DENSE_INPUT, prediction_output
from torchtfx.components.torch_trainer.modeling.determinism import find_nondeterminism
from torchtfx.components.torch_trainer.modeling.spec import BINARY
from torchtfx.components.torch_trainer.worker.shards import ArraySplit

logger = logging.getLogger(__name__)

ONNX_OPSET = 17
# An odd trace batch that no feature count or width is likely to equal, so that a constant equal to it
# (or a multiple of it) in the graph is a baked batch size; a second export at _SECOND_TRACE_BATCH tells
# which constants follow the batch.
TRACE_BATCH = 17
_SECOND_TRACE_BATCH = 23
VERIFY_BATCHES = (1, 7)
_VERIFY_TOLERANCE = 1e-5


class ExportError(RuntimeError):
    """The network cannot be exported to an ONNX graph that runs at every batch size."""


@dataclasses.dataclass(frozen=True)
class ExportReport:
    repairs: tuple[str, ...]  # names of the repairs that fired on the exported graph
    verified_batches: tuple[int, ...]
    symbolics: tuple[str, ...] = ()  # torch ops written by torchtfx's own symbolic functions
    exporter: str = "legacy"  # or "dynamo": torch.export, where the legacy exporter failed


def _sample(split: ArraySplit, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` rows of the split, cycled if the split is smaller."""
    rows = np.arange(batch) % max(len(split), 1)
    dense = np.ascontiguousarray(np.asarray(split.dense)[rows], np.float32)
    categorical = np.ascontiguousarray(np.asarray(split.categorical)[rows], np.int64)
    return torch.from_numpy(dense), torch.from_numpy(categorical)


def _trace(head: nn.Module, split: ArraySplit, batch: int, used: dict[str, int] | None = None) -> onnx.ModelProto:
    """The legacy exporter's graph of ``head`` traced at ``batch``; ``used`` collects the symbolics that fired."""
    sample = _sample(split, batch)
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad(), warnings.catch_warnings(), _no_fast_paths():
        # The tracer warns about Python ints taken from tensors: exactly what the verification below checks.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        path = Path(tmp) / "model.onnx"
        output = prediction_output(getattr(head, "task", BINARY))
        with symbolics.registered(ONNX_OPSET) as fired:
            try:
                with quiet_exporter():
                    torch.onnx.export(
                        head, sample, str(path), input_names=[DENSE_INPUT, CATEGORICAL_INPUT], output_names=[output],
                        dynamic_axes={name: {0: "batch"} for name in (DENSE_INPUT, CATEGORICAL_INPUT, output)},
                        opset_version=ONNX_OPSET, dynamo=False,
                    )  # fmt: skip
            except (torch.onnx.errors.OnnxExporterError, torch.onnx.errors.SymbolicValueError, RuntimeError) as err:
                raise ExportError(explain(err, head, sample)) from None
        if used is not None:
            used.update(fired)
        return onnx.load(str(path))


@contextlib.contextmanager
def _no_fast_paths() -> Iterator[None]:
    """Turn off the eval-mode fast paths (fused attention/encoder kernels that no exporter writes) meanwhile."""
    mha = getattr(torch.backends, "mha", None)
    before = mha.get_fastpath_enabled() if mha else None
    if mha:
        mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        if mha:
            mha.set_fastpath_enabled(before)


def batch_failures(graph: onnx.ModelProto, head: nn.Module, split: ArraySplit) -> dict[int, str]:
    """Batch size -> what went wrong, for each verification batch where onnxruntime fails or differs."""
    import onnxruntime as ort

    session = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    failures = {}
    for batch in VERIFY_BATCHES:
        dense, categorical = _sample(split, batch)
        try:
            (got,) = session.run(None, {DENSE_INPUT: dense.numpy(), CATEGORICAL_INPUT: categorical.numpy()})
        except Exception as err:  # onnxruntime names the node that failed
            failures[batch] = str(err).splitlines()[0][:400]
            continue
        with torch.no_grad():
            want = head(dense, categorical).numpy()
        diff = _scaled_diff(want, got.reshape(want.shape)) if got.size == want.size else float("inf")
        if not diff <= _VERIFY_TOLERANCE:
            failures[batch] = f"output differs from PyTorch by {diff:.3g} (shape {got.shape} vs {want.shape})"
    return failures


def _scaled_diff(want: np.ndarray, got: np.ndarray) -> float:
    """Max |got - want|, relative where |want| > 1 (regression targets in their own units can be large)."""
    return float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want)))) if want.size else 0.0


def export_onnx(head: nn.Module, split: ArraySplit, path: Path, recipe: ModelRecipe | None = None) -> ExportReport:
    """Export ``head`` (the network with its export head) to ``path``, verified at several batch sizes; where
    the legacy exporter fails and ``recipe`` can rebuild the network, the dynamo exporter is tried."""
    head = head.eval().cpu()
    varying = find_nondeterminism(head, _sample(split, VERIFY_BATCHES[-1]))
    if varying is not None:
        raise ExportError(varying.describe(type(head.model).__name__))
    used: dict[str, int] = {}
    try:
        graph = _trace(head, split, TRACE_BATCH, used)
    except ExportError as legacy:
        if recipe is None:
            raise
        return _save(_dynamo_graph(recipe, head, split, legacy), path, ExportReport((), VERIFY_BATCHES, (), "dynamo"))
    fired: list[str] = []
    failures = batch_failures(graph, head, split)
    if failures:
        logger.warning("ONNX export is not dynamic in its batch axis: %s; repairing", failures)
        second = _trace(head, split, _SECOND_TRACE_BATCH)
        graph, count = repairs.derive_batch_constants(graph, second, TRACE_BATCH, _SECOND_TRACE_BATCH)
        fired += [repairs.BATCH_CONSTANTS] if count else []
        failures = batch_failures(graph, head, split)
        if failures:
            raise ExportError(
                f"the ONNX export only works at the trace batch size {TRACE_BATCH}: {failures}. The model turns a "
                "value of the traced batch into a Python number that the graph keeps as a constant: the batch size "
                "(len(x), int(x.shape[0])), or a number computed from tensor values (a Python max() or int() over "
                f"a tensor, e.g. a one-hot depth); the batch_constants repair could not undo it ({count} constants "
                "rewritten). Use x.shape[0], reshape with -1, and keep such numbers as tensors."
            )
    return _save(graph, path, ExportReport(tuple(fired), VERIFY_BATCHES, tuple(sorted(used))))


def _dynamo_graph(recipe: ModelRecipe, head: nn.Module, split: ArraySplit, legacy: ExportError) -> onnx.ModelProto:
    """The dynamo exporter's graph of ``recipe``'s network, once it runs at every verification batch."""
    logger.warning("The legacy exporter failed (%s); trying the dynamo exporter", legacy)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            export_with_dynamo(recipe, head.model, TRACE_BATCH, Path(tmp) / "dynamo.onnx")
        except (DynamoExportError, subprocess.TimeoutExpired) as err:
            raise ExportError(f"{legacy} The dynamo exporter failed too: {err}") from None
        graph = onnx.load(str(Path(tmp) / "dynamo.onnx"))
    # torch.export may specialize the batch dimension to the trace's and the ONNX export still succeeds, with
    # fixed input shapes (measured on rtdl FTTransformer: "Constraints violated (batch) ... specialized it to
    # be a constant (17)"): name that rather than let onnxruntime refuse batch 1 later.
    fixed = [i.name for i in graph.graph.input if i.type.tensor_type.shape.dim[:1]
             and i.type.tensor_type.shape.dim[0].HasField("dim_value")]  # fmt: skip
    if fixed:
        raise ExportError(f"{legacy} The dynamo exporter fixed the batch size of {', '.join(fixed)} at "
                          f"{TRACE_BATCH}: torch.export specialized it (the model branches on the batch size or "
                          "computes a constant from it).")  # fmt: skip
    failures = batch_failures(graph, head, split)
    if failures:
        raise ExportError(f"the dynamo exporter's graph does not match PyTorch: {failures}")
    return graph


def _save(graph: onnx.ModelProto, path: Path, report: ExportReport) -> ExportReport:
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(graph, str(path))
    return report


_CHECK_BATCH = 65536


def check_onnx(head: nn.Module, path: Path, split: ArraySplit, batch_size: int = _CHECK_BATCH) -> float:
    """Max |torch - onnxruntime| over ``split``, batch by batch (relative where |torch| > 1).

    Batched because a whole split at once is slow to allocate and large: at 5M taxi rows onnxruntime's
    intermediate activations for the 1.7M eval rows took rank 0 to 3.8 GB of RSS.
    """
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    head = head.eval().cpu()
    diff = 0.0
    with torch.no_grad():
        for start in range(0, len(split), batch_size):
            dense = np.ascontiguousarray(split.dense[start : start + batch_size], np.float32)
            categorical = np.ascontiguousarray(split.categorical[start : start + batch_size], np.int64)
            want = head(torch.from_numpy(dense), torch.from_numpy(categorical)).numpy()
            (got,) = session.run(None, {DENSE_INPUT: dense, CATEGORICAL_INPUT: categorical})
            diff = max(diff, _scaled_diff(want, got.reshape(want.shape)))
    logger.info("ONNX export %s: max |torch - onnxruntime| = %.3g over %s rows", path, diff, len(split))
    return diff
