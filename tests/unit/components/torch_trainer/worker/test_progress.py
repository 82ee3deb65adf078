"""Rank 0's progress line inside a long epoch: at most once per interval, never on other ranks or at the end."""

from __future__ import annotations

import logging

import torch

from torchtfx.components.torch_trainer.worker.progress import EpochProgress


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "torchtfx.train"]


def test_a_long_epoch_says_its_step_rate_loss_and_time_left_once_a_minute(caplog):
    clock = _Clock()
    progress = EpochProgress(2, 3, 100, rank=0, every=60.0, clock=clock)
    total = torch.tensor([0.0, 0.0], dtype=torch.float64)
    with caplog.at_level(logging.INFO, logger="torchtfx.train"):
        for step in range(1, 101):
            clock.now += 1.5  # 40 steps a minute
            total += torch.tensor([0.5 * 32, 32], dtype=torch.float64)
            progress.step(step, total)
    lines = _lines(caplog)
    assert lines[0] == (
        "Epoch 2/3: step 40 of 100, 0.67 steps/s, mean train loss so far 0.5000, about 90 s left in this epoch"
    )
    assert [line.split(",")[0] for line in lines] == ["Epoch 2/3: step 40 of 100", "Epoch 2/3: step 80 of 100"]


def test_other_ranks_short_epochs_and_the_last_step_print_nothing(caplog):
    clock = _Clock()
    total = torch.tensor([1.0, 1.0], dtype=torch.float64)
    quiet = [
        EpochProgress(1, 1, 100, rank=1, clock=clock),  # not global rank 0
        EpochProgress(1, 1, 1, rank=0, clock=clock),  # one step
    ]
    last = EpochProgress(1, 1, 5, rank=0, clock=clock)
    with caplog.at_level(logging.INFO, logger="torchtfx.train"):
        clock.now = 1000.0
        for progress in quiet:
            progress.step(1, total)
        last.step(5, total)  # the epoch's own line follows
    assert _lines(caplog) == []


def test_the_time_left_reads_in_minutes_past_two():
    clock = _Clock()
    progress = EpochProgress(1, 1, 700, rank=0, every=60.0, clock=clock)
    clock.now = 60.0
    with_logs = []
    logger = logging.getLogger("torchtfx.train")
    handler = logging.Handler()
    handler.emit = lambda record: with_logs.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        progress.step(100, torch.tensor([50.0, 100.0], dtype=torch.float64))
    finally:
        logger.removeHandler(handler)
    assert with_logs == [
        "Epoch 1/1: step 100 of 700, 1.67 steps/s, mean train loss so far 0.5000, about 6 min left in this epoch"
    ]
