"""ONNX export of the trained network (legacy TorchScript exporter), with its dynamic batch verified.

``dynamo=False``: the dynamo exporter needs onnxscript, whose ml_dtypes conflicts with TF 2.16. The legacy
exporter traces one batch; research code that reads the batch size as a Python int (``len(x)``,
``int(x.shape[0])``) bakes that number into ``Reshape``/``Expand`` shapes, so the graph declares a dynamic
batch axis and fails at any other size. The export is therefore run in onnxruntime at batch sizes other
than the trace batch and, when it fails there, repaired (:mod:`.repairs`, ``batch_constants``).
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
import warnings
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

from torchtfx.components.converter import repairs
from torchtfx.components.torch_trainer.features import CATEGORICAL_INPUT, DENSE_INPUT, prediction_output
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


def _sample(split: ArraySplit, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` rows of the split, cycled if the split is smaller."""
    rows = np.arange(batch) % max(len(split), 1)
    dense = np.ascontiguousarray(np.asarray(split.dense)[rows], np.float32)
    categorical = np.ascontiguousarray(np.asarray(split.categorical)[rows], np.int64)
    return torch.from_numpy(dense), torch.from_numpy(categorical)


def _trace(head: nn.Module, split: ArraySplit, batch: int) -> onnx.ModelProto:
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad(), warnings.catch_warnings():
        # The tracer warns about Python ints taken from tensors: exactly what the verification below checks.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        path = Path(tmp) / "model.onnx"
        output = prediction_output(getattr(head, "task", BINARY))
        torch.onnx.export(
            head,
            _sample(split, batch),
            str(path),
            input_names=[DENSE_INPUT, CATEGORICAL_INPUT],
            output_names=[output],
            dynamic_axes={name: {0: "batch"} for name in (DENSE_INPUT, CATEGORICAL_INPUT, output)},
            opset_version=ONNX_OPSET,
            dynamo=False,
        )
        return onnx.load(str(path))


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


def export_onnx(head: nn.Module, split: ArraySplit, path: Path) -> ExportReport:
    """Export ``head`` (the network with its export head) to ``path``, verified at several batch sizes."""
    head = head.eval().cpu()
    graph = _trace(head, split, TRACE_BATCH)
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
                f"the ONNX export only works at the trace batch size {TRACE_BATCH}: {failures}. The model reads "
                "the batch size as a Python number (len(x), int(x.shape[0])) in a way the batch_constants repair "
                f"could not undo ({count} constants rewritten); use x.shape[0] or reshape with -1 instead."
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(graph, str(path))
    return ExportReport(tuple(fired), VERIFY_BATCHES)


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
