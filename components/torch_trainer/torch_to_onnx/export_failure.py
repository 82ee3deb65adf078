"""A failed export explained in one message: the torch op, the module path and the user's source line; a model
that fails in PyTorch itself at a verification size, with torch's error (:func:`fails_in_torch`).

Measured with torch 2.14.1: the legacy exporter prints the whole TorchScript graph (to C++'s std::cout) when it
fails (``setup_onnx_logging`` tests the function object ``_C._jit_is_onnx_log_enabled``, always true, so the
ONNX log is on during every export, and ``_C._jit_onnx_log("Torch IR graph at exception: ", graph)`` runs on
any exception): several hundred lines for a real model, before the one line that names the op.
:func:`quiet_exporter` keeps that output off the console and train.log (logged at DEBUG).
"""

from __future__ import annotations

import contextlib
import linecache
import logging
import os
import re
import tempfile
import warnings
from collections.abc import Iterator

import torch
from torch import nn

from torchtfx.components.torch_trainer.torch_to_onnx.shape_checks import TorchFailure

logger = logging.getLogger(__name__)

_OP = re.compile(r"'?(aten::[A-Za-z0-9_]+|prim::[A-Za-z0-9_]+)'?")
_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<function>\S+)$")
_KEPT_LOG_CHARS = 20_000


@contextlib.contextmanager
def quiet_exporter() -> Iterator[None]:
    """What the exporter's C++ side writes to fd 2 meanwhile goes to the DEBUG log instead of the console."""
    # Measured (torch 2.14.1, issue #41): the ONNX log, "Torch IR graph at exception" included, goes to C++'s
    # std::cout by default, buffered and flushed later to fd 1, which a DDP worker's agent tees into train.log
    # (about 330 lines for a real model): pointed at std::cerr (unbuffered, fd 2) it lands in the sink below.
    torch._C._jit_set_onnx_log_output_stream("stderr")
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            torch._C._jit_set_onnx_log_output_stream("stdout")  # torch's default
            sink.seek(0)
            text = sink.read(_KEPT_LOG_CHARS).decode("utf-8", "replace")
            if text.strip():
                logger.debug("torch.onnx.export wrote to stderr:\n%s", text)


def explain(err: Exception, head: nn.Module, sample: tuple) -> str:
    """The message for a model the exporter refused: what failed, where in the user's code, and the fix."""
    first = (str(err).strip().splitlines() or [type(err).__name__])[0][:400]
    match = _OP.search(first)
    where = _locate(match.group(1), head, sample) if match else None
    if isinstance(err, torch.onnx.errors.UnsupportedOperatorError) and match:
        message = (
            f"the torch op {match.group(1)} has no ONNX export at opset 17 (neither torch's exporter nor "
            "torchtfx's symbolics write it)"
        )
        fix = (
            "rewrite that line with ops that export (e.g. torch.cat instead of column_stack), or add a "
            "symbolic function to components/torch_trainer/torch_to_onnx/symbolics.py"
        )
    else:
        message = f"the ONNX export failed: {type(err).__name__}: {first}"
        fix = "the model must run in eval mode on CPU with the (dense, categorical) batch it is given"
    location = f" It is used in {where}." if where else ""
    return f"{message}.{location} Fix: {fix}."


def fails_in_torch(failures: dict) -> str | None:
    """The message for verification sizes where PyTorch itself fails (None: it runs at every one): torch's error
    and the user's line, not advice about batch sizes baked into the graph, which would be wrong there."""
    own = {key: what for key, what in failures.items() if isinstance(what, TorchFailure)}
    if not own:
        return None
    sizes = ", ".join(f"batch size {k}" if isinstance(k, int) else f"batch size {k[0]} and length {k[1]}" for k in own)
    return (
        f"the model fails in PyTorch itself at {sizes}, before any export: {next(iter(own.values()))}. The ONNX "
        "export is not the cause: TF Serving and the Evaluator call the model with any number of rows, one "
        "included. Fix: make forward work for any batch size (e.g. x.squeeze(-1), not x.squeeze(), which drops "
        "the batch axis of a one-row batch)."
    )


def _locate(op: str, head: nn.Module, sample: tuple) -> str | None:
    """``module path (Class), file:line in function: `source``` of the first node of kind ``op``."""
    try:
        with torch.no_grad(), warnings.catch_warnings(), quiet_exporter():
            warnings.simplefilter("ignore")
            graph = torch.jit.trace(head, sample, check_trace=False, strict=False).inlined_graph
    except Exception as err:
        logger.debug("Could not trace the model to locate %s: %s", op, err)
        return None
    node = next((n for n in _nodes(graph) if n.kind() == op), None)
    if node is None:
        return None
    path = node.scopeName().split("/")[-1].replace("__module.", "").replace("__module", "")
    modules = dict(head.named_modules())
    owner = f"module {path or '(top level)'} ({type(modules.get(path, head)).__name__})"
    frame = _user_frame(node.sourceRange())
    return f"{owner}, {frame}" if frame else owner


def _nodes(graph) -> Iterator:
    for node in graph.nodes():
        yield node
        for block in node.blocks():
            yield from _nodes(block)


def _user_frame(source_range: str) -> str | None:
    """The first frame of the trace's call stack outside torch: ``file:line in function: `code```."""
    for line in str(source_range).splitlines():
        found = _FRAME.match(line.strip())
        if not found or f"{os.sep}torch{os.sep}" in found["file"]:
            continue
        code = linecache.getline(found["file"], int(found["line"])).strip()
        where = f"{found['file']}:{found['line']} in {found['function']}"
        return f"{where}: `{code}`" if code else where
    return None
