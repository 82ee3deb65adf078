"""The DDP training loop with 2 real worker processes on CPU (torchrun, gloo), MLflow in sqlite."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from tests import helpers
from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.cluster.launch import launch
from torchtfx.components.torch_trainer.handoff.constants import FATAL_FILE
from torchtfx.components.torch_trainer.handoff.errors import TrainingFailedError
from torchtfx.components.torch_trainer.handoff.hparams import HParamsError, TrainerHParams
from torchtfx.components.torch_trainer.handoff.job import TrainResult


def test_two_process_ddp_trains_checkpoints_logs_and_exports(tmp_path, tiny_taxi):
    job = helpers.tiny_train_job(tmp_path, tiny_taxi)
    launch(job, tmp_path / "job.json", tmp_path / "train.log")
    result = TrainResult.load(tmp_path / "run" / contracts.RESULT_FILE)
    assert result.world_size == 2 and result.device == "cpu"
    assert result.epochs_run == 3 and 0.5 < result.eval_auc <= 1.0
    assert result.onnx_max_abs_diff < 1e-5
    # Rank 0 alone writes: one state_dict, one ONNX file, one checkpoint with the epoch.
    state = torch.load(tmp_path / "model" / contracts.STATE_DICT_FILE, weights_only=True)
    assert not any(k.startswith("module.") for k in state)  # model.module.state_dict(), not the DDP wrapper
    ckpt = torch.load(tmp_path / "run" / contracts.CHECKPOINT_FILE, weights_only=True)
    assert ckpt["epoch"] == 2
    assert (tmp_path / "model" / contracts.ONNX_FILE).is_file()
    assert (tmp_path / "run" / contracts.CURVES_FILE).stat().st_size > 1000
    log = (tmp_path / "train.log").read_text()
    assert "[rank 0]" in log and "[rank 1]" not in log  # rank 0 alone reports progress
    assert log.count("epoch 3/3") == 1
    history = json.loads((tmp_path / "run" / contracts.HISTORY_FILE).read_text())
    assert [h["epoch"] for h in history] == [1, 2, 3]

    from mlflow.tracking import MlflowClient

    client = MlflowClient(job.mlflow_tracking_uri)
    run = client.get_run(result.mlflow_run_id)
    assert run.data.params["num_workers"] == "2"
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "eval_loss")]
    assert steps == [1, 2, 3]
    assert len(client.search_runs([run.info.experiment_id])) == 1  # not one run per rank


def _local_sgd_rank(rank: int, job_path: str, store: str, out: str) -> None:
    """One of two real gloo ranks: train one epoch with local SGD, then report both ranks' parameters."""
    import torch.distributed as dist

    from torchtfx.components.torch_trainer.handoff.job import TrainJob
    from torchtfx.components.torch_trainer.worker.optimization import make_optimizer
    from torchtfx.components.torch_trainer.worker.train import DistContext, Trainer, load_train_objs

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        job, ctx = TrainJob.load(job_path), DistContext(rank, rank, 2, torch.device("cpu"))
        train_split, eval_split, model = load_train_objs(job, ctx)
        optimizer = make_optimizer(model, job.hparams)
        trainer = Trainer(model, train_split, eval_split, optimizer, ctx, job.hparams, Path(job.run_dir) / "ckpt.pt")
        before = torch.cat([p.detach().reshape(-1).clone() for p in trainer.model.module.parameters()])
        loss = trainer._train_epoch(0)
        after = torch.cat([p.detach().reshape(-1) for p in trainer.model.module.parameters()])
        gathered: list = [None, None]
        dist.all_gather_object(gathered, after)
        if rank == 0:
            torch.save({"before": before, "ranks": gathered, "loss": loss}, out)
    finally:
        dist.destroy_process_group()


def test_local_sgd_ends_every_epoch_with_one_model_on_every_rank(tmp_path, tiny_taxi):
    """sync_every > 1: ranks step on their own gradients between averages (300 rows per rank in batches of 32:
    10 steps, averaged after steps 4 and 8; steps 9-10 only by the epoch-end average), and every epoch ends
    with identical parameters on both ranks."""
    job = helpers.tiny_train_job(tmp_path, tiny_taxi, sync_every=4, batch_size=32)
    job.save(tmp_path / "job.json")
    out = tmp_path / "params.pt"
    torch.multiprocessing.spawn(
        _local_sgd_rank, args=(str(tmp_path / "job.json"), str(tmp_path / "store"), str(out)), nprocs=2
    )
    state = torch.load(out, weights_only=True)
    rank0, rank1 = state["ranks"]
    assert torch.equal(rank0, rank1)
    assert not torch.allclose(rank0, state["before"])  # it trained
    assert np.isfinite(state["loss"])


def test_two_process_local_sgd_trains_through_torchrun(tmp_path, tiny_taxi):
    job = helpers.tiny_train_job(tmp_path, tiny_taxi, sync_every=4)
    launch(job, tmp_path / "job.json", tmp_path / "train.log")
    result = TrainResult.load(tmp_path / "run" / contracts.RESULT_FILE)
    assert result.world_size == 2 and result.epochs_run == 3 and 0.5 < result.eval_auc <= 1.0


def test_early_stopping_ends_training_when_eval_loss_stalls(tmp_path, tiny_taxi):
    # A huge learning rate makes eval loss stall or rise; patience 1 must stop well before 30 epochs.
    job = helpers.tiny_train_job(tmp_path, tiny_taxi, epochs=30, learning_rate=5.0, early_stopping_patience=1)
    launch(job, tmp_path / "job.json", tmp_path / "train.log")
    result = TrainResult.load(tmp_path / "run" / contracts.RESULT_FILE)
    assert result.epochs_run < 30
    assert "Early stopping" in (tmp_path / "train.log").read_text()


def test_worker_failure_surfaces_with_the_log_tail(tmp_path, tiny_taxi):
    job = helpers.tiny_train_job(tmp_path, tiny_taxi)
    (tmp_path / "data" / "train" / "label.npy").write_bytes(b"not an array")
    with pytest.raises(TrainingFailedError, match="DDP training failed"):
        launch(job, tmp_path / "job.json", tmp_path / "train.log")


def test_hyperparameters_are_validated_before_any_work():
    with pytest.raises(HParamsError, match="batch_size: must be a whole number from 1 to 16,777,216, got 0"):
        TrainerHParams(batch_size=0)
    with pytest.raises(HParamsError, match="sync_every: must be 'auto' or a whole number >= 1, got 0"):
        TrainerHParams(sync_every=0)
    with pytest.raises(HParamsError, match="unknown key lr; allowed keys here: batch_size, "):
        TrainerHParams.parse({"lr": 1})
    assert np.isclose(TrainerHParams.from_json(TrainerHParams().to_json()).learning_rate, 3e-3)


@pytest.mark.parametrize("detect_anomaly", [False, True])
def test_a_diverging_model_stops_naming_epoch_step_and_rank(tmp_path, tiny_taxi, detect_anomaly):
    """Real torchrun workers: a NaN loss stops training at once (it would otherwise train on at NaN); with
    --detect-anomaly the message also names where the NaN appeared."""
    path = tmp_path / "diverging.py"
    source = helpers.diverging_model_source(finite_steps=2)
    path.write_text(source)
    model = {"factory": f"{path}:build", "source": source}
    job = helpers.tiny_train_job(tmp_path, tiny_taxi, model=model, detect_anomaly=detect_anomaly)
    # The message leads with the worker's own error, not torchrun's "child failed" report after it.
    with pytest.raises(TrainingFailedError, match=r"exit code 1\): rank \d: TrainingDiverged: Training diverged at "):
        launch(job, tmp_path / "job.json", tmp_path / "train.log")
    log = (tmp_path / "train.log").read_text()
    assert "Training diverged at epoch 1, step 3 on rank" in log
    # Trained once: a restart would diverge the same way, so the restarted workers stop at the marker.
    assert len(re.findall(r"^\[rank\d\]: \S*TrainingDiverged: ", log, re.M)) <= 2  # one attempt, two ranks
    assert f"Not started: {tmp_path / 'run' / FATAL_FILE} exists" in log
    if detect_anomaly:
        assert "SqrtBackward0" in log or "first submodule with a non-finite forward output" in log
    else:
        assert "non-finite loss=nan" in log and "--detect-anomaly" in log


def test_multiclass_trains_with_balanced_class_weights_on_two_processes(tmp_path, tiny_payment):
    job = helpers.tiny_train_job(tmp_path, tiny_payment, class_weights="balanced")
    launch(job, tmp_path / "job.json", tmp_path / "train.log")
    result = TrainResult.load(tmp_path / "run" / contracts.RESULT_FILE)
    majority = np.bincount(tiny_payment.arrays.label.astype(int)).max() / len(tiny_payment.arrays)
    assert set(result.eval_metrics) == {"accuracy"} and 0.3 < result.eval_metrics["accuracy"] <= 1.0, majority
    assert result.eval_auc is None and result.onnx_max_abs_diff < 1e-5
    log = (tmp_path / "train.log").read_text()
    assert "Balanced class weights" in log and "eval_accuracy=" in log
    history = json.loads((tmp_path / "run" / contracts.HISTORY_FILE).read_text())
    assert all("eval_accuracy" in h and "eval_auc" not in h for h in history)


def test_regression_trains_with_huber_loss_on_two_processes(tmp_path, tiny_tips):
    job = helpers.tiny_train_job(tmp_path, tiny_tips, regression_loss="huber", huber_delta=0.5)
    launch(job, tmp_path / "job.json", tmp_path / "train.log")
    result = TrainResult.load(tmp_path / "run" / contracts.RESULT_FILE)
    assert set(result.eval_metrics) == {"rmse", "mae"}
    # RMSE on log1p(tips) must beat predicting the mean of the eval targets.
    eval_labels = tiny_tips.arrays.label[len(tiny_tips.arrays) * 3 // 4 :]
    assert result.eval_metrics["rmse"] < float(np.std(eval_labels))
    assert result.onnx_max_abs_diff < 1e-4
