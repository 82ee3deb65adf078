"""Where an exported graph is checked: the sample inputs at a (batch, length), the pairs verified, and what
onnxruntime gives there against torch. The export traces at 17 rows (and 11 tokens); verification runs at
other batch sizes and lengths, including length 1 and ``max_length``, so a size baked into the graph shows.
"""

from __future__ import annotations

import numpy as np
import onnx
import torch
from torch import nn

from torchtfx.components.torch_trainer.handoff.shards import PADDING_ID, ArraySplit
from torchtfx.components.torch_trainer.modeling.features import CATEGORICAL_INPUT, DENSE_INPUT
from torchtfx.components.torch_trainer.modeling.tracebacks import torch_error

VERIFY_BATCHES = (1, 7)
# Sequence lengths traced, like the batch: odd, and unlikely to equal a width.
TRACE_LENGTH = 11
_SECOND_TRACE_LENGTH = 13
_VERIFY_TOLERANCE = 1e-5


class TorchFailure(str):
    """A shape failure that is PyTorch's own: the model raised there (torch's error and the user's line)."""


def trace_lengths(split: ArraySplit) -> tuple[int, int]:
    """The two sequence lengths traced (the second only tells which constants follow the length): odd numbers
    that no width is likely to equal, within every text feature's ``max_length``."""
    longest = min((ids.shape[1] for ids in split.sequences), default=0)
    if longest >= _SECOND_TRACE_LENGTH:
        return TRACE_LENGTH, _SECOND_TRACE_LENGTH
    return longest, max(1, longest - 1)


def verify_shapes(split: ArraySplit) -> tuple[tuple[int, int | None], ...]:
    """(batch, length) pairs the export is checked at, none of them the trace's: several batch sizes, and with
    text features the lengths 1, one between, and ``max_length`` (length None: tabular)."""
    if not split.sequences:
        return tuple((batch, None) for batch in VERIFY_BATCHES)
    longest = min(ids.shape[1] for ids in split.sequences)
    lengths = sorted({1, max(1, (longest + 1) // 2 + 1), longest} - {trace_lengths(split)[0]} or {longest})
    return tuple((batch, length) for batch in VERIFY_BATCHES for length in lengths)


def sample_inputs(split: ArraySplit, batch: int, length: int | None = None, only: int | None = None) -> tuple:
    """``batch`` rows of the split (cycled if the split is smaller) as ``forward``'s arguments, token ids cut or
    padded to exactly ``length`` columns (feature ``only`` alone when given; the others keep the first)."""
    rows = np.arange(batch) % max(len(split), 1)
    dense, categorical, *sequences = split.rows(rows).model_inputs()
    if length is not None:
        first = trace_lengths(split)[0]
        sequences = [exact_columns(ids, length if only in (None, i) else first) for i, ids in enumerate(sequences)]
    return tuple(torch.from_numpy(x) for x in (dense, categorical, *sequences))


def exact_columns(ids: np.ndarray, length: int) -> np.ndarray:
    if ids.shape[1] >= length:
        return np.ascontiguousarray(ids[:, :length])
    return np.pad(ids, ((0, 0), (0, length - ids.shape[1])), constant_values=PADDING_ID)


def traced_length(split: ArraySplit) -> int | None:
    return trace_lengths(split)[0] if split.sequences else None


def input_names(split: ArraySplit) -> tuple[str, ...]:
    """The graph's inputs: dense, categorical, then one per text feature, by its transformed name."""
    return (DENSE_INPUT, CATEGORICAL_INPUT, *split.sequence_names)


def shape_failures(graph: onnx.ModelProto, head: nn.Module, split: ArraySplit) -> dict:
    """Where onnxruntime fails or differs from PyTorch: batch size (tabular) or (batch, length) -> what (a
    :class:`TorchFailure` where PyTorch itself fails there)."""
    import onnxruntime as ort

    session = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    names = input_names(split)
    failures: dict = {}
    for batch, length in verify_shapes(split):
        key = batch if length is None else (batch, length)
        inputs = sample_inputs(split, batch, length)
        try:  # torch first: a model that fails in PyTorch itself at this size is not the export's fault
            with torch.no_grad():
                want = head(*inputs).numpy()
        except Exception as err:
            failures[key] = TorchFailure(torch_error(err))
            continue
        try:
            (got,) = session.run(None, {name: x.numpy() for name, x in zip(names, inputs, strict=True)})
        except Exception as err:  # onnxruntime names the node that failed
            failures[key] = str(err).splitlines()[0][:400]
            continue
        diff = scaled_diff(want, got.reshape(want.shape)) if got.size == want.size else float("inf")
        if not diff <= _VERIFY_TOLERANCE:
            failures[key] = f"output differs from PyTorch by {diff:.3g} (shape {got.shape} vs {want.shape})"
    return failures


def scaled_diff(want: np.ndarray, got: np.ndarray) -> float:
    """Max |got - want|, relative where |want| > 1 (regression targets in their own units can be large)."""
    return float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want)))) if want.size else 0.0
