"""The error both sides of the handoff raise when training fails: the workers (torchrun, a cluster job) or the
executor's in-process run; the executor and the CLI recognise it."""

from __future__ import annotations

from torchtfx.components.stage_failure import StageFailure


class TrainingFailedError(StageFailure):
    """The DDP workers exited with an error; the message carries the tail of their log."""
