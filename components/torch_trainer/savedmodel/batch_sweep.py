"""Batch-size sweep: the served SavedModel on real eval rows at batch 1, uneven sizes and the serving batch.

The parity gate serves the eval split in 4096-row batches; TF Serving and the Evaluator (TFMA) call
``serving_default`` with whatever a client or Beam hands them, one row included. A graph whose shapes are
computed from the data can pass at 4096 rows and fail at 1: measured on a top-2 mixture of experts whose
capacity ``ceil(1.25 * k * tokens / experts)`` came from the routed tokens and whose Python ``if busiest >
capacity`` on tensors the trace kept as it went for the traced rows. Its ONNX export passed the batch checks
(batch 1 and 7 of training rows), parity passed on the whole eval split, and ``serving_default`` raised
``Incompatible shapes: [9] vs. [1,13,2,4,7] [[{{node Mul_3}}]]`` at 1 and 2 eval rows. So the Trainer serves each
of :func:`sweep_sizes` rows (the first eval rows, repeated where the split is smaller) and compares with PyTorch
on the same rows, before the Evaluator sees the model.
"""

from __future__ import annotations

import dataclasses
import logging
import re

import numpy as np
import tensorflow as tf
import torch

from torchtfx.components.shared.served_interface import (
    EXAMPLES_INPUT,
    SERVING_SIGNATURE,
    TRANSFORM_SIGNATURE,
    prediction_output,
)
from torchtfx.components.stage_failure import StageFailure
from torchtfx.components.torch_trainer.handoff.materialize import example_batches
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.modeling.spec import REGRESSION
from torchtfx.components.torch_trainer.savedmodel.parity import relative_to_scale, torch_outputs

logger = logging.getLogger(__name__)

# Batch 1 (an online request, TFMA's last rows), small and uneven sizes that no width is likely to equal.
SWEEP_SIZES = (1, 2, 3, 7, 31)
_NODE = re.compile(r"\{\{node ([^}]+)\}\}")


class BatchSizeError(StageFailure):
    """The served SavedModel fails, or differs from PyTorch, at some batch sizes of real eval rows."""


@dataclasses.dataclass(frozen=True)
class SizeFailure:
    size: int
    cause: str  # TF's error (first line) or how far the output is from PyTorch's
    node: str | None = None  # the TF node that raised, from the error's ``[[{{node ...}}]]``
    torch_failed: bool = False  # PyTorch itself fails at this size


@dataclasses.dataclass(frozen=True)
class SweepReport:
    sizes: tuple[int, ...]
    failures: tuple[SizeFailure, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def failed_sizes(self) -> tuple[int, ...]:
        return tuple(f.size for f in self.failures)


def sweep_sizes(serving_batch: int) -> tuple[int, ...]:
    """:data:`SWEEP_SIZES` and TF Serving's ``max_batch_size`` (the batching settings), ascending."""
    return tuple(sorted({*SWEEP_SIZES, serving_batch}))


def sweep_batch_sizes(
    saved_model_dir: str,
    raw_split_uri: str,
    model: torch.nn.Module,
    layout: FeatureLayout,
    tolerance: float,
    serving_batch: int,
) -> SweepReport:
    """``serving_default`` at each of :func:`sweep_sizes` on the split's first rows, against PyTorch."""
    loaded = tf.saved_model.load(saved_model_dir)
    serve, transform = loaded.signatures[SERVING_SIGNATURE], loaded.signatures[TRANSFORM_SIGNATURE]
    net = ExportHead.for_layout(model, layout).eval()
    sizes = sweep_sizes(serving_batch)
    rows = next(iter(example_batches(raw_split_uri, max(sizes))), None)
    if rows is None or not len(rows):
        raise BatchSizeError(f"no raw examples in {raw_split_uri} to serve at batch sizes {sizes}")
    failures = []
    for size in sizes:
        examples = tf.gather(rows, np.arange(size) % len(rows))
        failure = _check_size(serve, transform, net, layout, examples, tolerance)
        if failure is not None:
            failures.append(dataclasses.replace(failure, size=size))
    return SweepReport(sizes, tuple(failures))


def _check_size(
    serve, transform, net: ExportHead, layout: FeatureLayout, examples: tf.Tensor, tolerance: float
) -> SizeFailure | None:
    try:
        y_tf = serve(**{EXAMPLES_INPUT: examples})[prediction_output(layout.task)].numpy()
    except tf.errors.OpError as err:
        found = _NODE.search(err.message)
        return SizeFailure(0, _first_line(err), found.group(1) if found else None)
    transformed = {k: v.numpy() for k, v in transform(**{EXAMPLES_INPUT: examples}).items()}
    try:
        y_torch = torch_outputs(net, transformed, layout)
    except Exception as err:  # the model itself fails at this size
        return SizeFailure(0, f"PyTorch itself raised {type(err).__name__}: {err}", torch_failed=True)
    want = y_torch.reshape(-1).astype(np.float64)
    if y_tf.size != want.size:
        return SizeFailure(0, f"output shape {y_tf.shape}, PyTorch's {y_torch.shape}")
    diff = np.abs(y_tf.reshape(-1).astype(np.float64) - want)
    gated = relative_to_scale(diff, want) if layout.task == REGRESSION else diff
    if not float(gated.max()) <= tolerance:
        return SizeFailure(0, f"output differs from PyTorch by {float(gated.max()):.3g} (tolerance {tolerance:.1g})")
    return None


def _first_line(err: tf.errors.OpError) -> str:
    """The line of TF's message that says what went wrong (not "Graph execution error:" nor the node line)."""
    lines = [line.strip() for line in err.message.splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith(("Graph execution error", "Detected at node", "<stack"))]
    return f"{type(err).__name__}: {_NODE.sub('', (useful or lines or [''])[0]).strip()}"[:400]


def enforce_sweep(report: SweepReport) -> None:
    """Stop with the sizes that fail, the node, the cause and the fix."""
    logger.info(
        "Batch-size sweep of serving_default on eval rows: sizes %s, failing %s",
        report.sizes,
        report.failed_sizes or "none",
    )
    if report.passed:
        return
    passing = [s for s in report.sizes if s not in report.failed_sizes]
    first = report.failures[0]
    where = f"node {first.node} raised " if first.node else ""
    sizes = ", ".join(map(str, report.failed_sizes))
    head = (
        f"the served SavedModel fails at batch size{'s' if len(report.failures) > 1 else ''} {sizes} of real eval "
        f"rows (passing at {', '.join(map(str, passing)) or 'none'}): {where}{first.cause}"
    )
    if first.torch_failed:
        cause = " The model fails in PyTorch itself at that batch size."
        fix = "make forward work for any number of rows, one included (e.g. squeeze(-1), not squeeze())"
    else:
        cause = (
            " Cause: a shape computed from the data (e.g. an expert capacity from the routed tokens) that the "
            "ONNX trace fixed for the traced rows, through a Python `if` on a tensor, int() or .item(); TF "
            "Serving and the Evaluator would fail the same requests."
        )
        fix = (
            "compute such sizes with tensor ops that hold at every batch size (torch.clamp, torch.minimum, "
            "torch.where instead of a Python `if` on tensor values; no int() or .item() on them)"
        )
    raise BatchSizeError(f"{head}.{cause} The model was not handed to the Evaluator. Fix: {fix}.")
