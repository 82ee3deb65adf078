"""Rank 0's progress line inside a long epoch: the step, the rate, the mean train loss so far and the time left.

Without it a long epoch is silent until its end: the MiniLM fine-tune on every review (tests/bench) ran 700 steps
in one epoch on 2 CPU cores for 24 to 31 minutes (two runs) between two log lines."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import torch

logger = logging.getLogger("torchtfx.train")

PROGRESS_EVERY_SECONDS = 60.0  # one line a minute at most: a short epoch (most runs) prints none


class EpochProgress:
    """``step(step, total)`` after every training step; logs on global rank 0 once ``every`` seconds have passed
    since the epoch began or since the last line. ``total``: the epoch's [sum of loss x rows, rows] so far."""

    def __init__(
        self,
        epoch: int,
        epochs: int,
        steps: int,
        rank: int,
        every: float = PROGRESS_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.epoch, self.epochs, self.steps = epoch, epochs, steps
        self.active = rank == 0 and steps > 1
        self.every, self.clock = every, clock
        self.start = self.last = clock()

    def step(self, step: int, total: torch.Tensor) -> None:
        if not self.active:
            return
        now = self.clock()
        if now - self.last < self.every or step >= self.steps:
            return
        self.last = now
        rate = step / max(now - self.start, 1e-9)
        mean_loss = float(total[0] / total[1]) if float(total[1]) else float("nan")  # a device sync, once a minute
        logger.info(
            "Epoch %s/%s: step %s of %s, %.2f steps/s, mean train loss so far %.4f, about %s left in this epoch",
            self.epoch,
            self.epochs,
            step,
            self.steps,
            rate,
            mean_loss,
            _duration((self.steps - step) / rate),
        )


def _duration(seconds: float) -> str:
    return f"{round(seconds)} s" if seconds < 120 else f"{round(seconds / 60)} min"
