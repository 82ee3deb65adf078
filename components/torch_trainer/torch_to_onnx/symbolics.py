"""ONNX symbolic functions for the torch ops the legacy (TorchScript) exporter lacks, each named and logged.

Measured with torch 2.14.1 at opset 17: of 118 ops a tabular or attention model commonly calls, 30 fail with
``UnsupportedOperatorError`` (``aten::column_stack``, ``dstack``, ``logaddexp``, ``sinc``, ``diff``, ...). Each
entry below writes one of them with standard ONNX operators, by torch's documented semantics, and is registered
only where torch has no symbolic of its own (a newer torch's wins). Like the graph repairs, every entry that
fires during an export is logged and recorded (the Trainer's result and the Model artifact's ``onnx_conversion``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
from collections.abc import Callable, Iterator

import torch
from torch.onnx import symbolic_helper as sh

logger = logging.getLogger(__name__)

_used: dict[str, int] = {}


@dataclasses.dataclass(frozen=True)
class Symbolic:
    name: str  # the torch op, without "aten::"
    fn: Callable
    what: str


SYMBOLICS: dict[str, Symbolic] = {}


def symbolic(name: str, what: str) -> Callable[[Callable], Callable]:
    def register(fn: Callable) -> Callable:
        def counted(g, *args):
            _used[name] = _used.get(name, 0) + 1
            return fn(g, *args)

        SYMBOLICS[name] = Symbolic(name, counted, what)
        return fn

    return register


def _const(g, value, dtype=torch.int64):
    return g.op("Constant", value_t=torch.tensor(value, dtype=dtype))


def _rank(value) -> int:
    rank = sh._get_tensor_rank(value)
    if rank is None:
        raise torch.onnx.errors.SymbolicValueError("the input's rank is unknown at export", value)
    return rank


def _int_list(value) -> list[int]:
    """A constant int or int[] argument as a list."""
    try:
        return [int(v) for v in sh._maybe_get_const(value, "is")]
    except (TypeError, RuntimeError):
        return [int(v) for v in torch.as_tensor(sh._maybe_get_const(value, "t")).reshape(-1).tolist()]


def _like(g, value, number: float):
    """``number`` as a scalar of ``value``'s dtype."""
    return g.op("CastLike", _const(g, number, torch.float64), value)


@symbolic("column_stack", "Concat on axis 1, 0-D/1-D inputs reshaped to columns")
def _column_stack(g, tensors):
    columns = [g.op("Reshape", t, _const(g, [-1, 1])) if _rank(t) <= 1 else t for t in sh._unpack_list(tensors)]
    return g.op("Concat", *columns, axis_i=1)


@symbolic("dstack", "Concat on axis 2, inputs made at least 3-D as torch.atleast_3d does")
def _dstack(g, tensors):
    shaped = []
    for t in sh._unpack_list(tensors):
        rank = _rank(t)
        if rank <= 1:
            t = g.op("Reshape", t, _const(g, [1, -1, 1]))
        elif rank == 2:
            t = g.op("Unsqueeze", t, _const(g, [2]))
        shaped.append(t)
    return g.op("Concat", *shaped, axis_i=2)


@symbolic("logaddexp", "max(a, b) + log(exp(a - m) + exp(b - m))")
def _logaddexp(g, a, b):
    top = g.op("Max", a, b)
    total = g.op("Add", g.op("Exp", g.op("Sub", a, top)), g.op("Exp", g.op("Sub", b, top)))
    return g.op("Add", top, g.op("Log", total))


@symbolic("sinc", "sin(pi x) / (pi x), 1 at 0")
def _sinc(g, x):
    scaled = g.op("Mul", x, _like(g, x, math.pi))
    zero = g.op("Equal", x, _like(g, x, 0.0))
    safe = g.op("Where", zero, _like(g, x, 1.0), scaled)
    return g.op("Where", zero, _like(g, x, 1.0), g.op("Div", g.op("Sin", safe), safe))


@symbolic("deg2rad", "x * pi / 180")
def _deg2rad(g, x):
    return g.op("Mul", x, _like(g, x, math.pi / 180.0))


@symbolic("rad2deg", "x * 180 / pi")
def _rad2deg(g, x):
    return g.op("Mul", x, _like(g, x, 180.0 / math.pi))


@symbolic("diff", "x[1:] - x[:-1] along dim (n=1, no prepend/append)")
def _diff(g, x, n, dim, prepend, append):
    if sh._maybe_get_const(n, "i") != 1 or not sh._is_none(prepend) or not sh._is_none(append):
        raise torch.onnx.errors.SymbolicValueError("torch.diff exports with n=1 and no prepend/append only", x)
    axis = _const(g, [sh._maybe_get_const(dim, "i")])
    big = _const(g, [2**62])
    later = g.op("Slice", x, _const(g, [1]), big, axis)
    earlier = g.op("Slice", x, _const(g, [0]), _const(g, [-1]), axis)
    return g.op("Sub", later, earlier)


@symbolic("xlogy", "x * log(y), 0 where x == 0")
def _xlogy(g, x, y):
    product = g.op("Mul", x, g.op("Log", y))
    return g.op("Where", g.op("Equal", x, _like(g, x, 0.0)), _like(g, product, 0.0), product)


@symbolic("special_entr", "-x log x for x > 0, 0 at 0, -inf below")
def _entr(g, x):
    positive = g.op("Neg", g.op("Mul", x, g.op("Log", x)))
    at_zero = g.op("Where", g.op("Equal", x, _like(g, x, 0.0)), _like(g, x, 0.0), _like(g, x, -math.inf))
    return g.op("Where", g.op("Greater", x, _like(g, x, 0.0)), positive, at_zero)


def _trunc_value(g, x):
    return g.op("Mul", g.op("Sign", x), g.op("Floor", g.op("Abs", x)))


@symbolic("trunc", "sign(x) * floor(|x|)")
def _trunc(g, x):
    return _trunc_value(g, x)


@symbolic("frac", "x - trunc(x)")
def _frac(g, x):
    return g.op("Sub", x, _trunc_value(g, x))


@symbolic("expm1", "exp(x) - 1")
def _expm1(g, x):
    return g.op("Sub", g.op("Exp", x), _like(g, x, 1.0))


@symbolic("hypot", "sqrt(a^2 + b^2)")
def _hypot(g, a, b):
    return g.op("Sqrt", g.op("Add", g.op("Mul", a, a), g.op("Mul", b, b)))


@symbolic("count_nonzero", "ReduceSum(x != 0) over dim (all dims when None)")
def _count_nonzero(g, x, dim):
    nonzero = g.op("Cast", g.op("Not", g.op("Equal", x, _like(g, x, 0.0))), to_i=sh.cast_pytorch_to_onnx["Long"])
    if sh._is_none(dim):
        return g.op("ReduceSum", nonzero, keepdims_i=0)
    return g.op("ReduceSum", nonzero, _const(g, _int_list(dim)), keepdims_i=0)


@symbolic("nanmean", "sum of the non-NaN values / their count")
def _nanmean(g, x, dim, keepdim, dtype):
    keep = int(sh._maybe_get_const(keepdim, "i"))
    nan = g.op("IsNaN", x)
    values = g.op("Where", nan, _like(g, x, 0.0), x)
    counts = g.op("CastLike", g.op("Not", nan), x)
    axes = [] if sh._is_none(dim) else [_const(g, _int_list(dim))]
    total = g.op("ReduceSum", values, *axes, keepdims_i=keep)
    return g.op("Div", total, g.op("ReduceSum", counts, *axes, keepdims_i=keep))


@symbolic("rms_norm", "x / sqrt(mean(x^2 over the normalized dims) + eps) * weight")
def _rms_norm(g, x, normalized_shape, weight, eps):
    count = len(sh._maybe_get_const(normalized_shape, "is"))
    epsilon = sh._maybe_get_const(eps, "f")
    if sh._is_none(eps) or not isinstance(epsilon, float):
        epsilon = float(torch.finfo(torch.float32).eps)
    # ReduceMean/ReduceMax take their axes as an attribute up to opset 17 (an input from 18).
    mean_square = g.op("ReduceMean", g.op("Mul", x, x), axes_i=list(range(-count, 0)), keepdims_i=1)
    normed = g.op("Div", x, g.op("Sqrt", g.op("Add", mean_square, _like(g, x, epsilon))))
    return normed if sh._is_none(weight) else g.op("Mul", normed, weight)


@symbolic("take_along_dim", "GatherElements along dim (indices of the input's rank)")
def _take_along_dim(g, x, indices, dim):
    if sh._is_none(dim):
        flat = g.op("Reshape", x, _const(g, [-1]))
        return g.op("GatherElements", flat, g.op("Reshape", indices, _const(g, [-1])), axis_i=0)
    return g.op("GatherElements", x, indices, axis_i=sh._maybe_get_const(dim, "i"))


@symbolic("isin", "any(elements[..., None] == test_elements.flatten()) over the last axis")
def _isin(g, elements, test_elements, assume_unique, invert):
    flat = g.op("Reshape", test_elements, _const(g, [-1]))
    equal = g.op("Equal", g.op("Unsqueeze", elements, _const(g, [-1])), flat)
    hits = g.op("ReduceMax", g.op("Cast", equal, to_i=sh.cast_pytorch_to_onnx["Int"]), axes_i=[-1], keepdims_i=0)
    found = g.op("Cast", hits, to_i=sh.cast_pytorch_to_onnx["Bool"])
    return g.op("Not", found) if sh._maybe_get_const(invert, "b") else found


@symbolic("logcumsumexp", "log(cumsum(exp(x - max))) + max along dim")
def _logcumsumexp(g, x, dim):
    axis = sh._maybe_get_const(dim, "i")
    top = g.op("ReduceMax", x, axes_i=[axis], keepdims_i=1)
    summed = g.op("CumSum", g.op("Exp", g.op("Sub", x, top)), _const(g, axis))
    return g.op("Add", g.op("Log", summed), top)


@symbolic(
    "uniform",
    "RandomUniformLike over the input's shape and dtype; the determinism check has proved the draw reaches no output",
)
def _uniform(g, x, low, high, generator=None):
    # A published sparse MoE draws ``torch.zeros_like(g).uniform_()`` on a branch its eval output ignores (a
    # second-expert policy whose threshold keeps every expert); export_onnx refuses a model whose eval output is
    # random before tracing (modeling/determinism.py), so a draw written here cannot reach a served output.
    low, high = sh._get_const(low, "f", "from"), sh._get_const(high, "f", "to")
    return g.op("RandomUniformLike", x, low_f=float(low), high_f=float(high))


@contextlib.contextmanager
def registered(opset: int) -> Iterator[dict[str, int]]:
    """Register every entry torch lacks at ``opset`` for the duration; yields {op name: times used}."""
    added = []
    for entry in SYMBOLICS.values():
        qualified = f"aten::{entry.name}"
        if _torch_has(qualified, opset):
            continue
        torch.onnx.register_custom_op_symbolic(qualified, entry.fn, opset)
        added.append(qualified)
    _used.clear()
    used: dict[str, int] = {}
    try:
        yield used
    finally:
        used.update(_used)
        for qualified in added:
            torch.onnx.unregister_custom_op_symbolic(qualified, opset)
        for name, count in used.items():
            logger.info(
                "Export: torch op aten::%s written by the %r symbolic (%s: %s node(s))",
                name,
                name,
                SYMBOLICS[name].what,
                count,
            )


def _torch_has(qualified: str, opset: int) -> bool:
    try:
        from torch.onnx._internal.torchscript_exporter import registration
    except ImportError:  # torch < 2.9 keeps it one level up
        from torch.onnx._internal import registration  # type: ignore[no-redef]
    return registration.registry.is_registered_op(qualified, opset)
