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
from torchtfx.components.shared.served_interface import prediction_output
from torchtfx.components.stage_failure import StageFailure
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit, eval_batch_size
from torchtfx.components.torch_trainer.modeling.determinism import find_nondeterminism
from torchtfx.components.torch_trainer.modeling.spec import BINARY
from torchtfx.components.torch_trainer.torch_to_onnx import symbolics
from torchtfx.components.torch_trainer.torch_to_onnx.dynamo_export import (
    DynamoExportError,
    ModelRecipe,
    export_with_dynamo,
)
from torchtfx.components.torch_trainer.torch_to_onnx.export_failure import explain, fails_in_torch, quiet_exporter
from torchtfx.components.torch_trainer.torch_to_onnx.shape_checks import (
    VERIFY_BATCHES,
    input_names,
    mask_failure,
    sample_inputs,
    scaled_diff,
    shape_failures,
    trace_lengths,
    traced_length,
    verify_shapes,
)

logger = logging.getLogger(__name__)

ONNX_OPSET = 17
# An odd trace batch that no feature count or width is likely to equal, so that a constant equal to it
# (or a multiple of it) in the graph is a baked batch size; a second export at _SECOND_TRACE_BATCH tells
# which constants follow the batch.
TRACE_BATCH = 17
_SECOND_TRACE_BATCH = 23


class ExportError(StageFailure):
    """The network cannot be exported to an ONNX graph that runs at every batch size."""


@dataclasses.dataclass(frozen=True)
class ExportReport:
    repairs: tuple[str, ...]  # names of the repairs that fired on the exported graph
    verified_batches: tuple[int, ...]
    symbolics: tuple[str, ...] = ()  # torch ops written by torchtfx's own symbolic functions
    exporter: str = "legacy"  # or "dynamo": torch.export, where the legacy exporter failed
    verified_shapes: tuple[tuple[int, int | None], ...] = ()  # (batch, length) checked in onnxruntime


def _trace(
    head: nn.Module,
    split: ArraySplit,
    batch: int,
    used: dict[str, int] | None = None,
    length: int | None = None,
    only: int | None = None,
) -> onnx.ModelProto:
    """The legacy exporter's graph of ``head`` traced at ``batch`` rows (and ``length`` tokens: see
    :func:`_sample`); ``used`` collects the symbolics that fired."""
    sample = sample_inputs(split, batch, length if length is not None else traced_length(split), only)
    names = input_names(split)
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad(), warnings.catch_warnings(), _no_fast_paths():
        # The tracer warns about Python ints taken from tensors: exactly what the verification below checks.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        path = Path(tmp) / "model.onnx"
        output = prediction_output(getattr(head, "task", BINARY))
        axes = {name: {0: "batch"} for name in (*names[:2], output)}
        axes.update({name: {0: "batch", 1: f"{name}_length"} for name in names[2:]})
        with symbolics.registered(ONNX_OPSET) as fired:
            try:
                with quiet_exporter():
                    torch.onnx.export(
                        head,
                        sample,
                        str(path),
                        input_names=list(names),
                        output_names=[output],
                        dynamic_axes=axes,
                        opset_version=ONNX_OPSET,
                        dynamo=False,
                    )
            except (torch.onnx.errors.OnnxExporterError, torch.onnx.errors.SymbolicValueError, RuntimeError) as err:
                raise ExportError(explain(err, head, sample)) from None
        if used is not None:
            used.update(fired)
        return _with_every_input(onnx.load(str(path)), names, sample)


def _with_every_input(graph: onnx.ModelProto, names: tuple[str, ...], sample: tuple) -> onnx.ModelProto:
    """The graph with every input of ``forward``, in order. The exporter drops an input that no node reads (a
    text model given zero dense columns, say); every consumer feeds all of them, so an unread one stays declared,
    which ONNX allows."""
    declared = {i.name: i for i in graph.graph.input}
    if tuple(declared) == names:
        return graph
    inputs = []
    for name, value in zip(names, sample, strict=True):
        dims = ["batch", *(d if i else f"{name}_length" for i, d in enumerate(value.shape[1:]))]
        dtype = onnx.helper.np_dtype_to_tensor_dtype(value.numpy().dtype)
        inputs.append(declared.get(name) or onnx.helper.make_tensor_value_info(name, dtype, dims))
    del graph.graph.input[:]
    graph.graph.input.extend(inputs)
    return graph


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


def export_onnx(head: nn.Module, split: ArraySplit, path: Path, recipe: ModelRecipe | None = None) -> ExportReport:
    """Export ``head`` (the network with its export head) to ``path``, verified at several batch sizes (and
    sequence lengths); where the legacy exporter fails and ``recipe`` can rebuild the network, the dynamo
    exporter is tried."""
    head = head.eval().cpu()
    varying = find_nondeterminism(head, sample_inputs(split, VERIFY_BATCHES[-1], traced_length(split)))
    if varying is not None:
        raise ExportError(varying.describe(type(head.model).__name__))
    used: dict[str, int] = {}
    shapes = verify_shapes(split)
    try:
        graph = _trace(head, split, TRACE_BATCH, used)
    except ExportError as legacy:
        if recipe is None:
            raise
        graph = _dynamo_graph(recipe, head, split, legacy)
        return _save(graph, path, ExportReport((), VERIFY_BATCHES, (), "dynamo", shapes))
    fired: tuple[str, ...] = ()
    failures = shape_failures(graph, head, split)
    if own := fails_in_torch(failures) or mask_failure(failures):
        raise ExportError(own)
    if failures:
        logger.warning("ONNX export is not dynamic in its batch or length axes: %s; repairing", failures)
        graph, fired = _repaired(graph, head, split)
        failures = shape_failures(graph, head, split)
        if failures:
            raise ExportError(_not_dynamic(graph, split, failures, fired))
    return _save(graph, path, ExportReport(fired, VERIFY_BATCHES, tuple(sorted(used)), "legacy", shapes))


def _repaired(graph: onnx.ModelProto, head: nn.Module, split: ArraySplit) -> tuple[onnx.ModelProto, tuple[str, ...]]:
    """``graph`` with the constants that follow the trace batch, then each text feature's trace length, computed
    from the inputs' shapes (each found by comparing with a trace at another batch or length)."""
    fired = []
    graph, count = repairs.derive_batch_constants(
        graph, _trace(head, split, _SECOND_TRACE_BATCH), TRACE_BATCH, _SECOND_TRACE_BATCH
    )
    fired += [repairs.BATCH_CONSTANTS] if count else []
    first, second = trace_lengths(split)
    for index, name in enumerate(split.sequence_names if first != second else ()):
        other, _ = repairs.derive_batch_constants(
            _trace(head, split, TRACE_BATCH, length=second, only=index),
            _trace(head, split, _SECOND_TRACE_BATCH, length=second, only=index),
            TRACE_BATCH,
            _SECOND_TRACE_BATCH,
        )
        graph, count = repairs.derive_batch_constants(graph, other, first, second, input_name=name, axis=1)
        fired += [repairs.LENGTH_CONSTANTS] if count and repairs.LENGTH_CONSTANTS not in fired else []
    return graph, tuple(fired)


def _not_dynamic(graph: onnx.ModelProto, split: ArraySplit, failures: dict, fired: tuple[str, ...]) -> str:
    """Why the export works only at its trace shape, with the nodes that hold the traced sizes as constants."""
    length = trace_lengths(split)[0] if split.sequences else None
    suspects = _nodes_with_constant(graph, [TRACE_BATCH] + ([length] if length else []))
    where = f" Nodes holding the traced size as a constant: {', '.join(suspects)}." if suspects else ""
    sizes = f"batch size {TRACE_BATCH}" + (f" and sequence length {length}" if length else "")
    return (
        f"the ONNX export only works at the trace {sizes}: {failures}.{where} The model turns a value of the "
        "trace into a Python number that the graph keeps as a constant: the batch size or length (len(x), "
        "int(x.shape[0]), int(ids.shape[1])), or a number computed from tensor values (a Python max() or int() "
        f"over a tensor, e.g. a one-hot depth); the repairs ({', '.join(fired) or 'none fired'}) could not undo it. "
        "Use x.shape[0] / x.shape[1] as they are, reshape with -1, and keep such numbers as tensors."
    )


def _nodes_with_constant(graph: onnx.ModelProto, values: list[int], limit: int = 3) -> list[str]:
    """Up to ``limit`` nodes (name and op) fed a small integer constant that contains one of ``values``."""
    constants = {
        name
        for name, value in repairs.graph_constants(graph).items()
        if np.issubdtype(value.dtype, np.integer) and value.size <= 8 and np.isin(value, values).any()
    }
    found = [f"{n.name or n.output[0]} ({n.op_type})" for n in graph.graph.node if constants & set(n.input)]
    return found[:limit]


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
    fixed = [
        i.name
        for i in graph.graph.input
        if i.type.tensor_type.shape.dim[:1] and i.type.tensor_type.shape.dim[0].HasField("dim_value")
    ]
    if fixed:
        raise ExportError(
            f"{legacy} The dynamo exporter fixed the batch size of {', '.join(fixed)} at "
            f"{TRACE_BATCH}: torch.export specialized it (the model branches on the batch size or "
            "computes a constant from it)."
        )
    failures = shape_failures(graph, head, split)
    if failures:
        raise ExportError(fails_in_torch(failures) or f"the dynamo exporter's graph does not match PyTorch: {failures}")
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
    names = input_names(split)
    batch_size = min(batch_size, eval_batch_size(split)) if split.sequences else batch_size
    diff = 0.0
    with torch.no_grad():
        for start in range(0, len(split), batch_size):
            inputs = split.model_inputs(slice(start, start + batch_size))
            want = head(*map(torch.from_numpy, inputs)).numpy()
            (got,) = session.run(None, dict(zip(names, inputs, strict=True)))
            diff = max(diff, scaled_diff(want, got.reshape(want.shape)))
    logger.info("ONNX export %s: max |torch - onnxruntime| = %.3g over %s rows", path, diff, len(split))
    return diff
