"""Failures of the libraries underneath that torchtfx can name: the stage, the cause and the fix, instead of
"unexpected ... may be a bug".

- TFMA's ``ValueError: Fail to call signature func with signature_name: serving_default`` (raised in
  ``tensorflow_model_analysis/utils/model_util.py`` from the TypeError or InvalidArgumentError of calling the
  candidate's served signature on a batch of eval examples; the message then lists every input of the batch).
- TensorFlow's shape errors in a served graph (``Incompatible shapes: [1,16,4,7] vs. [1,16,4,8]``, a reshape or
  concat of the wrong size): a shape computed from the data, which works at one batch size and not another.

Each error is read through its whole chain (``__cause__``, ``__context__``) and as text: Beam re-raises a DoFn's
error as a copy with `` [while running '<step>']`` appended whose context is the original, and its multi-process
runner sends only the text. The stage is TFMA's (the Evaluator) for a signature failure, else the first stage
whose code is on the traceback. Imports nothing heavy: the CLI loads it at start.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from torchtfx.components.shared.served_interface import SERVING_SIGNATURE

SIGNATURE_FAILURE = "Fail to call signature func"
_SIGNATURE_NAME = re.compile(r"Fail to call signature func with signature_name: ([\w-]+)")
_SHAPE = re.compile(
    r"(Incompatible shapes: \[[\d,]*\] vs\. \[[\d,]*\]"
    r"|Input to reshape is a tensor with \d+ values, but the requested shape [^\n\[]*"
    r"|ConcatOp ?: Dimensions of inputs should match[^\n\[]*"
    r"|Matrix size-incompatible[^\n\[]*"
    r"|required broadcastable shapes"
    r"|slice index -?\d+ of dimension \d+ out of bounds)"
)
_NODE = re.compile(r"\{\{node ([^}]+)\}\}")
# Where a frame's module says which stage was running (the first match on the traceback wins).
_STAGES = (
    ("tensorflow_model_analysis", "Evaluator"),
    ("tfx.components.evaluator", "Evaluator"),
    ("torchtfx.components.torch_trainer", "TorchTrainer"),
    ("tensorflow_transform", "Transform"),
    ("tfx.components.transform", "Transform"),
    ("torchtfx.components.promoter", "Promoter"),
    ("torchtfx.pipeline.predict", "predict"),
)
_SHAPE_FIX = (
    "The graph computes a shape from the data (a size taken from the batch or from values, e.g. an expert "
    "capacity or a one-hot depth), so it runs at some batch sizes and not at others; TF Serving would fail the "
    "same requests. Fix the model so that sizes follow the input's shape (x.shape[0], reshape with -1, no size "
    "from a tensor's values), then rerun."
)


def _chain(err: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _stage(chain: list[BaseException]) -> str | None:
    for err in chain:
        tb = err.__traceback__
        while tb is not None:
            module = tb.tb_frame.f_globals.get("__name__", "")
            for prefix, stage in _STAGES:
                if module == prefix or module.startswith(prefix + "."):
                    return stage
            tb = tb.tb_next
    return None


def _shape_cause(text: str) -> str | None:
    found = _SHAPE.search(text)
    if not found:
        return None
    node = _NODE.search(text, found.end())
    return found.group(0).strip() + (f" at node {node.group(1)}" if node else "")


def _signature_failure(text: str, cause: str | None) -> str:
    name = _SIGNATURE_NAME.search(text)
    signature = name.group(1) if name else SERVING_SIGNATURE
    if cause:
        return (
            f"Evaluator: TFMA could not run the candidate's served signature '{signature}' on a batch of eval "
            f"examples: {cause}. The SavedModel passed the Trainer's parity check at its own batch size. "
            f"{_SHAPE_FIX} Nothing was promoted; the champion and the serving directory are unchanged."
        )
    return (
        f"Evaluator: TFMA could not run the candidate's served signature '{signature}' on a batch of eval "
        "examples (its inputs or types do not match what the signature takes). A SavedModel built by the "
        "TorchTrainer takes serialized tf.Examples: a model_dir or SavedModel from elsewhere must keep that "
        "signature. Rerun with -v for TensorFlow's message. Nothing was promoted; the champion and the serving "
        "directory are unchanged."
    )


def known_failure(err: BaseException) -> str | None:
    """The user's one-line account of ``err`` (stage, cause, fix) when it is one torchtfx recognises, else None."""
    chain = list(_chain(err))
    text = "\n".join(str(e) for e in chain)
    cause = _shape_cause(text)
    if SIGNATURE_FAILURE in text:
        return _signature_failure(text, cause)
    if cause:
        stage = _stage(chain) or "the served model"
        return f"{stage}: TensorFlow's graph failed on a shape: {cause}. {_SHAPE_FIX}"
    return None
