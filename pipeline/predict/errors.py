"""The batch scoring's own error: a stage failure (components/stage_failure.py), which the command line
shows as its message, without a traceback."""

from __future__ import annotations

from torchtfx.components.stage_failure import StageFailure


class PredictError(StageFailure):
    """Batch scoring cannot run as asked; the message says why, what was (not) written, and what to do."""
