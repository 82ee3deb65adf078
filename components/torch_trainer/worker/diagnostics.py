"""Training diagnostics: stop a diverged run with a message that says where and what to do about it.

``NonFiniteGuard`` checks each step's loss and gradient norm (cheap, always on). ``anomaly_detection`` is the
slow debugging mode behind ``--detect-anomaly``: autograd anomaly mode plus forward hooks, so the error names
the autograd function, the forward line and the first submodule whose output went non-finite. Torch only: the
DDP workers import this, and they never import TFX or TensorFlow.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import warnings
from collections.abc import Iterator

import torch
from torch import nn

logger = logging.getLogger("torchtfx.train")

FIX = "lower the learning rate, check the inputs for NaN/inf, or rerun with --detect-anomaly to name the op"
LOCATED_FIX = (
    "lower the learning rate or check the values reaching that op (log, sqrt, division or pow of values at or "
    "below zero are the usual causes)"
)

# GradScaler starts at 2**16 and halves its scale on every skipped step, so 16 consecutive skips take it below
# 1; past that, scaling no longer causes the overflow and the gradients themselves are inf/NaN. 25 leaves 9
# halvings of margin (a scale of ~2**-9) before calling it persistent, and costs at most 25 wasted steps.
DEFAULT_MAX_SKIPPED_STEPS = 25

# The RuntimeError autograd raises in anomaly mode (torch/csrc/autograd/engine.cpp, validate_outputs).
_ANOMALY = re.compile(r"Function '(?P<function>[^']+)' returned nan values in its (?P<output>\d+)\w* output")
# The UserWarning anomaly mode emits just before: the forward traceback of the failing node.
_FORWARD_TRACE = "Traceback of forward call that caused the error"
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)\n\s*(?P<code>[^\n]*)')
_NO_OP = contextlib.nullcontext()  # stateless, so one instance serves every disabled step


class TrainingDiverged(RuntimeError):
    """The run produced non-finite values it cannot recover from; the message says where and what to try."""

    def __init__(self, epoch: int, step: int, rank: int, what: str, fix: str = FIX) -> None:
        super().__init__(f"Training diverged at epoch {epoch}, step {step} on rank {rank}: {what}. Fix: {fix}.")
        self.epoch, self.step, self.rank, self.what, self.fix = epoch, step, rank, what, fix

    def __reduce__(self) -> tuple[type[TrainingDiverged], tuple[int, int, int, str, str]]:
        # Exceptions pickle as cls(*self.args); ours takes different arguments (multiprocessing, torchrun).
        return type(self), (self.epoch, self.step, self.rank, self.what, self.fix)


def _value(t: torch.Tensor) -> str:
    return ", ".join(f"{v:.6g}" for v in t.detach().float().reshape(-1).tolist())


def _describe(loss: torch.Tensor, grad_norm: torch.Tensor) -> str:
    return f"loss={_value(loss)}, gradient norm={_value(grad_norm)}"


def _all_finite(loss: torch.Tensor, grad_norm: torch.Tensor) -> bool:
    # One tiny kernel and one .item() per step: the only host sync this guard adds (see NonFiniteGuard).
    values = torch.cat([loss.detach().reshape(-1).float(), grad_norm.detach().reshape(-1).float().to(loss.device)])
    return bool(torch.isfinite(values).all().item())


class NonFiniteGuard:
    """Raise ``TrainingDiverged`` when a step's loss or gradient norm is non-finite and will stay so.

    Without AMP any non-finite value raises at once. With AMP, GradScaler skips steps whose gradients hold
    inf/NaN and lowers its scale (normal while it calibrates, early in training): those steps are counted, and
    only ``max_skipped_steps`` skips in a row raise. A non-finite loss on a step GradScaler did *not* skip
    raises, since nothing will correct it.

    Cost: a skipped AMP step is decided by the caller's ``step_skipped`` alone, with no sync here. Any other
    step runs ``torch.isfinite`` on the 2-element (loss, norm) tensor and reads it with one ``.item()``. In the
    Trainer, AMP is on exactly when training on CUDA, so the non-AMP path is CPU (no device sync at all) and on
    CUDA the caller's ``scaler.get_scale()`` has just drained the stream: the wait is one tiny kernel.
    """

    def __init__(self, rank: int, amp: bool, max_skipped_steps: int = DEFAULT_MAX_SKIPPED_STEPS) -> None:
        if max_skipped_steps < 1:
            raise ValueError(f"max_skipped_steps must be at least 1, got {max_skipped_steps}")
        self.rank, self.amp, self.max_skipped_steps = rank, amp, max_skipped_steps
        self._skipped = 0
        self._streak = 0
        self._streak_start = (0, 0)  # (epoch, step) of the first skip in the current run of skips

    @property
    def skipped_steps(self) -> int:
        """Steps GradScaler skipped so far (all of them, not only the current run)."""
        return self._skipped

    @property
    def consecutive_skipped(self) -> int:
        return self._streak

    def after_step(
        self, epoch: int, step: int, loss: torch.Tensor, grad_norm: torch.Tensor, step_skipped: bool
    ) -> None:
        """Check one step, after ``clip_grad_norm_`` (its return value is ``grad_norm``) and the optimizer step.

        ``epoch`` and ``step`` are reported as given (pass them as the logs number them). ``step_skipped``: the
        scaler's scale after ``update()`` is below the scale before it; ignored without AMP."""
        if self.amp and step_skipped:
            self._count_skip(epoch, step, loss, grad_norm)
            return
        self._streak = 0
        if _all_finite(loss, grad_norm):
            return
        what = f"non-finite {_describe(loss, grad_norm)}"
        if self.amp:
            what += " on a step GradScaler did not skip (its gradients were finite, so it cannot recover)"
        raise TrainingDiverged(epoch, step, self.rank, what)

    def _count_skip(self, epoch: int, step: int, loss: torch.Tensor, grad_norm: torch.Tensor) -> None:
        if self._streak == 0:
            self._streak_start = (epoch, step)
        self._skipped += 1
        self._streak += 1
        logger.debug("AMP skipped step %s of epoch %s (non-finite gradients; scale lowered)", step, epoch)
        if self._streak < self.max_skipped_steps:
            return
        first_epoch, first_step = self._streak_start
        what = (
            f"GradScaler skipped {self._streak} consecutive steps (since epoch {first_epoch}, step {first_step}; "
            f"{self._skipped} in all) on non-finite gradients, so lowering the scale does not help; last step "
            f"{_describe(loss, grad_norm)}"
        )
        raise TrainingDiverged(epoch, step, self.rank, what)


def _tensors(value: object) -> Iterator[torch.Tensor]:
    """The tensors in a module's output: a tensor, or tuples/lists/dicts (namedtuples too) of them."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def _has_nonfinite(value: object) -> bool:
    return any(
        not bool(torch.isfinite(t).all())
        for t in _tensors(value)
        if (t.is_floating_point() or t.is_complex()) and t.layout == torch.strided and t.numel() > 0
    )


def _forward_frame(caught: list[warnings.WarningMessage]) -> str | None:
    """The innermost forward frame of anomaly mode's traceback warning: the line that called the op."""
    for message in caught:
        text = str(message.message)
        if _FORWARD_TRACE in text:
            frames = list(_FRAME.finditer(text))
            if frames:
                last = frames[-1]
                return f'File "{last["file"]}", line {last["line"]}, in {last["func"]}: {last["code"].strip()}'
    return None


class AnomalyWatch:
    """What ``anomaly_detection`` yields; ``locate`` wraps each step's forward and backward."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.first_nonfinite: tuple[str, str] | None = None  # (qualified name, class) in the current step
        self._recording = False

    def locate(self, epoch: int, step: int, rank: int) -> contextlib.AbstractContextManager[None]:
        """Turn anomaly mode's NaN error (or a non-finite forward output) into ``TrainingDiverged``.

        A shared no-op when disabled, so the training loop can always use it."""
        return self._locate(epoch, step, rank) if self.enabled else _NO_OP

    def _observe(self, name: str, module: nn.Module, args: object, output: object) -> None:
        # Hooks fire innermost-first in execution order, so the first hit is where the value went bad. Checking
        # syncs per module; anomaly mode already syncs per autograd node, so this is not what makes it slow.
        if self._recording and self.first_nonfinite is None and _has_nonfinite(output):
            self.first_nonfinite = (name or "<root>", type(module).__qualname__)

    def _module_text(self) -> str:
        if self.first_nonfinite is None:
            return "no submodule's forward output was non-finite, so the NaN first appeared in backward"
        name, cls = self.first_nonfinite
        return f"first submodule with a non-finite forward output: '{name}' ({cls})"

    @contextlib.contextmanager
    def _locate(self, epoch: int, step: int, rank: int) -> Iterator[None]:
        self.first_nonfinite, self._recording = None, True
        caught: list[warnings.WarningMessage] = []
        try:
            # Record the step's warnings to read anomaly mode's forward traceback; all are shown again below.
            with warnings.catch_warnings(record=True) as caught:
                yield
        except RuntimeError as err:
            match = _ANOMALY.search(str(err))
            if match is None:
                raise
            raise TrainingDiverged(epoch, step, rank, self._backward_text(match, caught), LOCATED_FIX) from err
        finally:
            self._recording = False
            for message in caught:
                warnings.showwarning(message.message, message.category, message.filename, message.lineno)
        if self.first_nonfinite is not None:
            # The loss can be NaN with no NaN in backward (a NaN added, not multiplied): the hooks still saw it.
            raise TrainingDiverged(epoch, step, rank, self._module_text(), LOCATED_FIX)

    def _backward_text(self, match: re.Match[str], caught: list[warnings.WarningMessage]) -> str:
        frame = _forward_frame(caught)
        where = f" (forward call: {frame})" if frame else " (anomaly mode printed its forward traceback above)"
        head = f"autograd function {match['function']} returned NaN in its output {match['output']} during backward"
        return f"{head}{where}; {self._module_text()}"


@contextlib.contextmanager
def anomaly_detection(model: nn.Module, enabled: bool) -> Iterator[AnomalyWatch]:
    """Anomaly mode (``check_nan``) and a non-finite-output hook on every submodule of ``model``, while open.

    Hooks are removed and the previous anomaly setting restored on exit. Disabled: no hooks, no anomaly mode,
    and ``locate`` is a shared ``nullcontext``. Anomaly mode is slow (a forward traceback per op, a NaN check
    per backward node): a debugging rerun, not a default."""
    watch = AnomalyWatch(enabled)
    if not enabled:
        yield watch
        return
    with contextlib.ExitStack() as stack:
        # set_detect_anomaly sets the mode when constructed and restores the previous one in __exit__.
        stack.enter_context(torch.autograd.set_detect_anomaly(True, check_nan=True))
        for name, module in model.named_modules():
            stack.callback(module.register_forward_hook(functools.partial(watch._observe, name)).remove)
        logger.warning("Anomaly detection on: autograd anomaly mode and forward hooks (slow; for debugging)")
        yield watch
