"""Training diagnostics on real torch (CPU): the non-finite guard, with and without AMP's skipped steps, and
anomaly detection naming the autograd function and the forward submodule where a NaN appeared."""

from __future__ import annotations

import pickle
import re

import pytest
import torch
from torch import nn

from torchtfx.components.torch_trainer.worker.diagnostics import (
    NonFiniteGuard,
    TrainingDiverged,
    anomaly_detection,
)

NAN, INF = torch.tensor(float("nan")), torch.tensor(float("inf"))
ONE = torch.tensor(1.0)


# -- the guard -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("loss", "norm", "shown"), [(NAN, ONE, "loss=nan"), (ONE, INF, "gradient norm=inf")])
def test_guard_without_amp_raises_on_the_first_non_finite_value(loss, norm, shown):
    guard = NonFiniteGuard(rank=1, amp=False)
    guard.after_step(3, 6, ONE, ONE, step_skipped=False)
    with pytest.raises(TrainingDiverged) as info:
        guard.after_step(3, 7, loss, norm, step_skipped=False)
    message = str(info.value)
    assert "epoch 3, step 7 on rank 1" in message
    assert shown in message
    assert "learning rate" in message and "--detect-anomaly" in message
    assert (info.value.epoch, info.value.step, info.value.rank) == (3, 7, 1)


def test_guard_with_amp_tolerates_and_counts_isolated_skipped_steps():
    guard = NonFiniteGuard(rank=0, amp=True, max_skipped_steps=3)
    for step, skipped in enumerate([True, True, False, True, False, True, True, False], start=1):
        # A skipped step's loss is often NaN too (NaN loss -> NaN gradients -> skip): it counts as a skip.
        guard.after_step(1, step, NAN if skipped else ONE, INF if skipped else ONE, step_skipped=skipped)
    assert guard.skipped_steps == 5
    assert guard.consecutive_skipped == 0


def test_guard_with_amp_raises_after_max_consecutive_skipped_steps():
    guard = NonFiniteGuard(rank=2, amp=True, max_skipped_steps=3)
    guard.after_step(1, 9, INF, INF, step_skipped=True)  # an earlier, isolated skip
    guard.after_step(1, 10, ONE, ONE, step_skipped=False)
    guard.after_step(1, 11, ONE, INF, step_skipped=True)
    guard.after_step(2, 1, ONE, INF, step_skipped=True)  # runs of skips span epochs
    with pytest.raises(TrainingDiverged, match=r"epoch 2, step 2 on rank 2") as info:
        guard.after_step(2, 2, NAN, INF, step_skipped=True)
    message = str(info.value)
    assert "3 consecutive steps (since epoch 1, step 11; 4 in all)" in message
    assert "loss=nan, gradient norm=inf" in message


def test_guard_with_amp_raises_on_a_non_finite_loss_whose_step_was_not_skipped():
    guard = NonFiniteGuard(rank=0, amp=True)
    with pytest.raises(TrainingDiverged, match=r"epoch 4, step 5 on rank 0: non-finite loss=inf.*did not skip"):
        guard.after_step(4, 5, INF, ONE, step_skipped=False)


def test_guard_counts_a_real_grad_scaler_skip():
    """The caller's rule (scale after update below scale before) on a real GradScaler and optimizer."""
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    guard = NonFiniteGuard(rank=0, amp=True, max_skipped_steps=2)
    for step, x in enumerate([[1.0, float("inf")], [1.0, 2.0]], start=1):
        optimizer.zero_grad(set_to_none=True)
        loss = model(torch.tensor([x])).sum()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        before = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        guard.after_step(1, step, loss, norm, step_skipped=scaler.get_scale() < before)
    assert guard.skipped_steps == 1
    assert guard.consecutive_skipped == 0


def test_training_diverged_survives_pickling():
    error = pickle.loads(pickle.dumps(TrainingDiverged(1, 2, 3, "loss=nan")))
    assert (error.epoch, error.step, error.rank, str(error)) == (1, 2, 3, str(TrainingDiverged(1, 2, 3, "loss=nan")))


# -- anomaly detection -----------------------------------------------------------------------------------
class LogScale(nn.Module):
    """Multiplies by log(scale): a scale that went negative makes the forward output NaN."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(-1.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.log(self.scale)


class Offset(nn.Module):
    """Adds a buffer: a NaN in it makes the loss NaN while every gradient stays finite."""

    def __init__(self, offset: float) -> None:
        super().__init__()
        self.register_buffer("offset", torch.tensor(offset))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.offset


class RowNorm(nn.Module):
    """Hand-written L2 norm of each row: 0 on an all-zero row, fine forward, but its gradient is NaN there."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt((x * x).sum(-1, keepdim=True))


def _step(model: nn.Module, x: torch.Tensor, epoch: int, step: int, rank: int, enabled: bool = True) -> None:
    with anomaly_detection(model, enabled=enabled) as watch, watch.locate(epoch, step, rank):
        model(x).mean().backward()


def test_nan_in_forward_names_the_backward_function_and_the_submodule():
    model = nn.Sequential(nn.Linear(3, 4), LogScale(), nn.Linear(4, 1))
    with pytest.raises(TrainingDiverged) as info:
        _step(model, torch.ones(2, 3), epoch=2, step=5, rank=1)
    message = str(info.value)
    assert "epoch 2, step 5 on rank 1" in message
    # Backward meets the NaN first in the last Linear's weight gradient (its input is LogScale's NaN output).
    assert re.search(r"autograd function (AddmmBackward0|MulBackward0) returned NaN", message)
    assert "first submodule with a non-finite forward output: '1' (LogScale)" in message


def test_nan_in_forward_only_is_named_by_the_hooks():
    model = nn.Sequential(nn.Linear(3, 4), nn.Sequential(nn.ReLU(), Offset(float("nan"))), nn.Linear(4, 1))
    with pytest.raises(TrainingDiverged, match=r"epoch 1, step 3 on rank 0: .*'1\.1' \(Offset\)"):
        _step(model, torch.ones(2, 3), epoch=1, step=3, rank=0)


def test_nan_only_in_backward_names_the_autograd_function():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4, bias=False), RowNorm(), nn.Linear(1, 1))
    x = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])  # an all-zero row: its norm's gradient is 0 * inf
    with pytest.raises(TrainingDiverged) as info:
        _step(model, x, epoch=7, step=12, rank=3)
    message = str(info.value)
    assert "epoch 7, step 12 on rank 3" in message
    assert "autograd function MulBackward0 returned NaN in its output 0 during backward" in message
    assert "no submodule's forward output was non-finite" in message
    assert "torch.sqrt((x * x).sum(-1, keepdim=True))" in message


def test_anomaly_detection_removes_its_hooks_and_restores_anomaly_mode():
    model = nn.Sequential(nn.Linear(3, 4), LogScale())
    assert not torch.is_anomaly_enabled()
    with anomaly_detection(model, enabled=True):
        assert torch.is_anomaly_enabled()
        assert all(len(m._forward_hooks) == 1 for m in model.modules())
    with pytest.raises(TrainingDiverged), anomaly_detection(model, enabled=True) as watch:
        with watch.locate(1, 1, 0):
            model(torch.ones(1, 3)).sum().backward()
    assert not torch.is_anomaly_enabled()
    assert all(not m._forward_hooks for m in model.modules())


def test_other_errors_pass_through_locate_unchanged():
    model = nn.Linear(3, 1)
    with pytest.raises(RuntimeError, match="mat1 and mat2") as info:
        _step(model, torch.ones(2, 5), epoch=1, step=1, rank=0)
    assert not isinstance(info.value, TrainingDiverged)


def test_disabled_anomaly_detection_registers_nothing_and_stays_out_of_the_way():
    model = nn.Sequential(nn.Linear(3, 4), LogScale(), nn.Linear(4, 1))
    with anomaly_detection(model, enabled=False) as watch:
        assert all(not m._forward_hooks for m in model.modules())
        assert not torch.is_anomaly_enabled()
        with watch.locate(1, 1, 0):
            loss = model(torch.ones(2, 3)).mean()
            loss.backward()  # the NaN goes through: the guard's job, not anomaly mode's
    assert torch.isnan(loss)
    assert watch.locate(1, 1, 0) is watch.locate(2, 2, 0)  # one shared no-op, nothing built per step
