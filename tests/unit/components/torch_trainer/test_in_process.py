"""num_workers / sync_every "auto", and one worker trained in the caller's own process (small data)."""

from __future__ import annotations

import json

import pytest
import torch
import torch.distributed as dist

from tests import helpers
from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.handoff.errors import TrainingFailedError
from torchtfx.components.torch_trainer.handoff.hparams import (
    CPU_LOCAL_SGD_STEPS,
    CPU_WORKERS,
    IN_PROCESS_MAX_TRAIN_ROWS,
    TrainerHParams,
)
from torchtfx.components.torch_trainer.handoff.job import TrainResult
from torchtfx.components.torch_trainer.worker.in_process import run_in_process


def test_auto_trains_small_data_in_process_and_large_data_with_ddp():
    auto = TrainerHParams()
    assert auto.num_workers == "auto" and auto.sync_every == "auto"
    assert auto.workers_for(IN_PROCESS_MAX_TRAIN_ROWS - 1, gpus=0) == 0  # in this process
    assert auto.workers_for(IN_PROCESS_MAX_TRAIN_ROWS, gpus=0) == CPU_WORKERS
    assert auto.workers_for(10, gpus=4) == 4  # one DDP worker per GPU, whatever the size
    assert auto.replace(device="cpu").workers_for(10, gpus=4) == 0
    assert auto.replace(num_workers=3).workers_for(10, gpus=0) == 3  # a number is always honoured


def test_auto_sync_is_plain_ddp_on_gpus_and_local_sgd_on_cpu():
    assert TrainerHParams().sync_steps("cuda") == 1
    assert TrainerHParams().sync_steps("cpu") == CPU_LOCAL_SGD_STEPS
    assert TrainerHParams(sync_every=1).sync_steps("cpu") == 1


def test_in_process_training_writes_what_a_ddp_run_writes(tmp_path, tiny_taxi):
    job = helpers.tiny_train_job(tmp_path, tiny_taxi, num_workers=1)
    threads = torch.get_num_threads()
    run_in_process(job, tmp_path / "logs" / "train.log", threads=2)
    assert torch.get_num_threads() == threads and not dist.is_initialized()  # the process is left as it was
    result = TrainResult.load(tmp_path / "run" / contracts.RESULT_FILE)
    assert result.world_size == 1 and result.epochs_run == 3 and 0.5 < result.eval_auc <= 1.0
    assert result.onnx_max_abs_diff < 1e-5 and (tmp_path / "model" / contracts.ONNX_FILE).is_file()
    assert torch.load(tmp_path / "run" / contracts.CHECKPOINT_FILE, weights_only=True)["epoch"] == 2
    assert [h["epoch"] for h in json.loads((tmp_path / "run" / contracts.HISTORY_FILE).read_text())] == [1, 2, 3]
    assert (tmp_path / "logs" / "train.log").read_text().count("epoch 3/3") == 1

    from mlflow.tracking import MlflowClient

    steps = [
        m.step for m in MlflowClient(job.mlflow_tracking_uri).get_metric_history(result.mlflow_run_id, "eval_loss")
    ]
    assert steps == [1, 2, 3]


def test_an_in_process_failure_names_the_error_and_the_log(tmp_path, tiny_taxi):
    job = helpers.tiny_train_job(tmp_path, tiny_taxi, num_workers=1)
    (tmp_path / "data" / "train" / "dense.npy").write_bytes(b"not an array")
    with pytest.raises(TrainingFailedError, match=r"training failed in process: .*\nfull log: .*train\.log"):
        run_in_process(job, tmp_path / "train.log")
    assert not dist.is_initialized()
    assert "in-process training failed" in (tmp_path / "train.log").read_text()
