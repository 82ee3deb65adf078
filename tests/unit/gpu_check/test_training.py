"""make gpu-check's verdict on a DDP run, from the files the Trainer leaves (result, checkpoint, history): the
launch is replaced here (the real one needs a GPU for device="cuda")."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tests.gpu_check import training
from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.handoff.job import TrainResult


class _Job:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = str(run_dir)


def _verdict(monkeypatch, tmp_path, device: str, scaler: dict, loss: float, ranks: int = 1):
    def launch(job, job_path, log_path):
        run = Path(job.run_dir)
        run.mkdir(parents=True)
        TrainResult(1, 1, loss, {"auc": 0.9}, 600, 200, ranks, device, 2.0, 300.0, 1e-6, None).save(
            run / contracts.RESULT_FILE
        )
        torch.save({"epoch": 0, "scaler": scaler}, run / contracts.CHECKPOINT_FILE)
        (run / contracts.HISTORY_FILE).write_text(json.dumps([{"epoch": 1, "train_loss": 0.5, "eval_loss": loss}]))

    monkeypatch.setattr(training, "launch", launch)
    return training._ddp_verdict(_Job(tmp_path / "run"), tmp_path, ranks)


def test_a_run_on_cuda_with_its_grad_scaler_and_finite_losses_passes(monkeypatch, tmp_path):
    status, detail = _verdict(monkeypatch, tmp_path, "cuda", {"scale": 65536.0, "growth_factor": 2.0}, 0.4)
    assert status == "PASS", detail
    assert detail.startswith("1 rank(s) on cuda (nccl), fp16 autocast + GradScaler (scale 65536.0)"), detail


def test_a_run_on_the_cpu_without_amp_or_with_a_nan_loss_fails_naming_each(monkeypatch, tmp_path):
    status, detail = _verdict(monkeypatch, tmp_path, "cpu", {}, float("nan"), ranks=2)
    assert status == "FAIL"
    assert detail.startswith("trained on cpu, not cuda; AMP was off (the checkpoint's GradScaler state is"), detail
    assert "a loss is not finite: [nan, 0.5, nan]" in detail
