"""Where an exported graph is checked: the sample inputs at a (batch, length), the pairs verified, and what
onnxruntime gives there against torch. The export traces at 17 rows (and 11 tokens); verification runs at
other batch sizes and lengths, including length 1 and ``max_length``, so a size baked into the graph shows.

Every batch, traced or verified, holds rows padded to several lengths (:func:`staggered`), after a first row
that fills the length. Measured: a model that skips its padding mask when no row is padded (``if
mask.all():``, the fast path transformers' SDPA mask takes outside a trace) traced on texts that all fill
``max_length`` (long reviews cut there) gave a graph with no mask, and the rows the check fed were full too, so
it passed (a tiny BERT whose mask builder lost its tracing guard: 3e-3 off on padded rows); with padded rows
in the trace the masked path is the one traced (exact on full rows too), and where a branch still fixes the
mask (:class:`MaskFailure`) the padded rows differ while the full rows match, which names it.

Hugging Face encoders need no repair here (transformers 5.20.2, torch 2.14.1, legacy exporter, opset 17):
BERT, RoBERTa and DistilBERT with ``eager`` and ``sdpa`` attention, traced on full or padded rows, match torch
to 4e-6 on padded batches of other sizes and lengths (empty rows included), all-MiniLM-L6-v2 to 3e-6:
transformers checks ``is_jit_tracing()`` before it skips the mask, and the mask's ``padding_length`` branch
is 0 whenever the mask is as long as the ids. The 0.5-0.9 measured earlier came from the torch reference, not
the graph: ``torch.onnx.export`` puts the module back in the mode it found it in, and a wrapper built around
the eval-mode ``from_pretrained`` model (``nn.Module`` starts in training mode) was restored to training,
dropout 0.1 included, for every call after the export. The exporter compares with ``head.eval()``.
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


class MaskFailure(str):
    """The graph differs from PyTorch on padded rows only: its padding mask was fixed at the trace."""


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
        sequences = [staggered(ids) for ids in sequences]
    return tuple(torch.from_numpy(x) for x in (dense, categorical, *sequences))


def staggered(ids: np.ndarray) -> np.ndarray:
    """``ids`` with row r cut to at most ``length - r * step % length`` tokens (padding after): the first row as
    it is, the others padded to several lengths, none empty that was not (step: about a third of the length)."""
    length = ids.shape[1]
    keep = length - (np.arange(len(ids)) * (length // 3 + 1)) % length
    out = ids.copy()
    out[np.arange(length)[None, :] >= keep[:, None]] = PADDING_ID
    return out


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
        if got.size != want.size:
            failures[key] = f"output shape {got.shape} differs from PyTorch's {want.shape}"
            continue
        got = got.reshape(want.shape)
        if not (diff := scaled_diff(want, got)) <= _VERIFY_TOLERANCE:
            failures[key] = _differs(want, got, inputs[2:], diff)
    return failures


def _differs(want: np.ndarray, got: np.ndarray, sequences: tuple, diff: float) -> str:
    """What the graph gets wrong: a :class:`MaskFailure` where the rows that fill the length match and the rows
    padded before it do not (the trace fixed the padding mask), else the largest difference."""
    what = f"output differs from PyTorch by {diff:.3g}"
    if not sequences:
        return what
    padded = np.any([ids[:, -1].numpy() == PADDING_ID for ids in sequences], axis=0)
    rows = np.array([scaled_diff(w, g) for w, g in zip(want, got, strict=True)])
    if padded.any() and (~padded).any() and rows[padded].max() > _VERIFY_TOLERANCE >= rows[~padded].max():
        return MaskFailure(f"{what} on the rows padded before this length, while the rows that fill it match")
    return what


def mask_failure(failures: dict) -> str | None:
    """The refusal for a graph whose padding mask was fixed at the trace, when every failure is one."""
    if not failures or not all(isinstance(what, MaskFailure) for what in failures.values()):
        return None
    return (
        f"the ONNX export ignores padding: {failures}. The padding mask was fixed at the trace: the model "
        "branches in Python on the ids or the mask (if mask.all(), bool(...), .item(), .tolist(), or on the "
        "batch size) and the traced branch is kept for every input. Compute the mask with tensor ops and apply "
        "it unconditionally (mask = ids != 0, passed as the attention mask even when no row is padded)."
    )


def scaled_diff(want: np.ndarray, got: np.ndarray) -> float:
    """Max |got - want|, relative where |want| > 1 (regression targets in their own units can be large)."""
    return float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want)))) if want.size else 0.0
