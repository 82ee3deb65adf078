"""What a restarted worker resumes: the training loop in one real gloo rank, its checkpoint on disk, MLflow in
sqlite. The two-process kill itself is in tests/unit/components/test_faults.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from tests import helpers
from torchtfx.components.shared import contracts
from torchtfx.components.shared.mlflow_client import MlflowRun
from torchtfx.components.torch_trainer.handoff.constants import CHECKPOINT_META_FILE
from torchtfx.components.torch_trainer.worker import publish
from torchtfx.components.torch_trainer.worker.checkpoint import save_checkpoint
from torchtfx.components.torch_trainer.worker.optimization import make_optimizer
from torchtfx.components.torch_trainer.worker.train import DistContext, Trainer, load_train_objs


@pytest.fixture
def one_rank(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield DistContext(0, 0, 1, torch.device("cpu"))
    dist.destroy_process_group()


def _trainer(job, ctx: DistContext, tracker: MlflowRun | None = None) -> Trainer:
    train_split, eval_split, model = load_train_objs(job, ctx)
    checkpoint = Path(job.run_dir) / contracts.CHECKPOINT_FILE
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    return Trainer(
        model,
        train_split,
        eval_split,
        make_optimizer(model, job.hparams),
        ctx,
        job.hparams,
        checkpoint,
        tracker,
        job.layout.model_spec(),
    )


def test_a_worker_restarted_after_early_stopping_trains_no_more_epochs(tmp_path, tiny_taxi, one_rank):
    """Early stopping had ended training and a worker died while exporting: the restart must export the same
    best epoch, not train on as if patience had been reset."""
    _trainer(helpers.tiny_train_job(tmp_path, tiny_taxi, epochs=2), one_rank).train()
    checkpoint = Path(tmp_path / "run" / contracts.CHECKPOINT_FILE)
    state = torch.load(checkpoint, weights_only=True)
    save_checkpoint({**state, "bad_epochs": 3}, checkpoint)  # as if epochs 0-2 had not improved (patience 3)
    restarted = _trainer(helpers.tiny_train_job(tmp_path, tiny_taxi, epochs=6), one_rank)
    restarted.resume()
    run = restarted.train()
    assert run.epochs_run == 2 and [h["epoch"] for h in run.history] == [1, 2]


def test_a_restart_logs_the_checkpointed_epochs_mlflow_missed_and_continues_the_steps(tmp_path, tiny_taxi, one_rank):
    """Rank 0 died after checkpointing epoch 2 and before logging it: the restarted rank 0 reopens the same
    MLflow run, logs epoch 2, then 3 and 4: each step once."""
    job = helpers.tiny_train_job(tmp_path, tiny_taxi, epochs=2)
    first = _trainer(job, one_rank).train()
    job = helpers.tiny_train_job(tmp_path, tiny_taxi, epochs=4)
    tracker = publish.start_tracking(job)
    publish.log_epoch(tracker, first.history[0])  # only epoch 1 reached MLflow
    restarted = _trainer(job, one_rank, publish.start_tracking(job))  # reopened from the id in run_dir
    assert restarted.tracker.run_id == tracker.run_id
    restarted.resume()
    restarted.train()
    steps = [m.step for m in tracker.client.get_metric_history(tracker.run_id, "eval_loss")]
    assert sorted(steps) == [1, 2, 3, 4]
    summary = json.loads((tmp_path / "run" / CHECKPOINT_META_FILE).read_text())
    assert summary["last_completed_epoch"] == 4 and [h["epoch"] for h in summary["history"]] == [1, 2, 3, 4]
