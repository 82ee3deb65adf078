"""Early stopping's rule for "better": the eval losses measured at 1M synthetic taxi rows stop training after epoch 4
with the default min_delta (the best stays epoch 1), where every tiny decrease used to restart the patience."""

from __future__ import annotations

import math

from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.worker.outcomes import improves

# Eval loss per epoch of the 1M-row scale bench run (tests/bench/results/scale.json's run before the change).
MEASURED_1M = [0.2415, 0.2438, 0.2421, 0.2414, 0.2415, 0.2414, 0.2421]


def _stopping_epoch(losses: list[float], patience: int, min_delta: float) -> tuple[int, int]:
    best, bad, best_epoch = math.inf, 0, 0
    for epoch, loss in enumerate(losses, start=1):
        if improves(loss, best, min_delta):
            best, bad, best_epoch = loss, 0, epoch
        else:
            bad += 1
        if bad >= patience:
            return epoch, best_epoch
    return len(losses), best_epoch


def test_negligible_decreases_do_not_count_as_improvements_by_default():
    hp = TrainerHParams()
    assert _stopping_epoch(MEASURED_1M, hp.early_stopping_patience, hp.early_stopping_min_delta) == (4, 1)
    assert _stopping_epoch(MEASURED_1M, hp.early_stopping_patience, 0.0) == (7, 4)  # the rule before


def test_real_improvements_still_count_and_the_first_finite_loss_is_the_best():
    assert improves(0.2228, 0.2247, 1e-3)  # taxi epoch 3 after epoch 2: 0.85% lower
    assert not improves(0.2414, 0.2415, 1e-3)
    assert improves(1.0, math.inf, 1e-3)
    assert not improves(math.nan, math.inf, 1e-3)
    assert not improves(math.nan, 0.5, 0.0)
    assert improves(-2.0, -1.0, 1e-3)  # a loss below zero (a user's own loss): by the best's size
    assert not improves(0.5 - 1e-7, 0.5, 0.0)  # never less than 1e-6
