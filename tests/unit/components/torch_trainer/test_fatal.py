"""Failures a restart cannot cure end the run after one attempt: a collective that times out (real torchrun, two
gloo workers, one of them stuck) and a checkpoint on a full disk."""

from __future__ import annotations

import dataclasses
import errno
import re
import socket
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from tests import helpers
from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.cluster.launch import failure_message, launch
from torchtfx.components.torch_trainer.handoff.constants import FATAL_FILE
from torchtfx.components.torch_trainer.handoff.errors import TrainingFailedError
from torchtfx.components.torch_trainer.handoff.hparams import HParamsError, TrainerHParams
from torchtfx.components.torch_trainer.worker import checkpoint, collectives, fatal, train

# Rank 1 stops at its sixth training step (epoch 2), outside every collective (an endless loop, a read that never
# returns); rank 0 trains on into the epoch-end parameter average and waits there for it. Six: the dry run that
# looks for unused parameters calls forward four times on a copy (worker/unused_parameters.py), whose count
# starts from the model's 0 and never reaches 6.
HANGING_MODEL = """
import time

import torch.distributed as dist
from torch import nn


class Hanging(nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.lin = nn.Linear(len(spec.dense_features), 1)
        self.calls = 0

    def forward(self, dense, categorical):
        self.calls += self.training
        if self.training and self.calls == 6 and dist.get_rank() == 1:
            time.sleep(600)
        return self.lin(dense).squeeze(1) + 0 * categorical[:, 0]


def build(spec):
    return Hanging(spec)
"""


def test_a_rank_that_never_enters_a_collective_fails_the_run_once_naming_rank_and_collective(tmp_path, tiny_taxi):
    path = tmp_path / "hanging.py"
    path.write_text(HANGING_MODEL)
    model = {"factory": f"{path}:build", "source": HANGING_MODEL}
    job = helpers.tiny_train_job(tmp_path, tiny_taxi, model=model, collective_timeout_seconds=5, max_restarts=3)
    # No MLflow: with it, rank 0 opened its sqlite run for over 3 s while rank 1 waited in DDP's first collective.
    job = dataclasses.replace(job, mlflow_tracking_uri="")
    started = time.monotonic()
    with pytest.raises(TrainingFailedError) as failed:
        launch(job, tmp_path / "job.json", tmp_path / "train.log")
    seconds = time.monotonic() - started
    message = str(failed.value)
    assert re.search(
        r"\): rank 0: CollectiveTimeout: gloo:all_reduce #\d+ \(called at train\.py:\d+ in _train_epoch\) did not "
        r"complete within 5 s \(collective_timeout_seconds\): another rank never entered it",
        message,
    ), message
    assert "Timed out waiting 5000ms for recv operation" in message  # torch's own words follow
    log = (tmp_path / "train.log").read_text()
    # One attempt: the restarted workers (max_restarts 3) stop at the marker instead of waiting again.
    assert f"Not started: {tmp_path / 'run' / FATAL_FILE} exists" in log
    assert len(re.findall(r"^\[rank0\]: \S*CollectiveTimeout: ", log, re.M)) == 1, log
    assert seconds < 90, seconds  # torch's gloo default would have waited 30 minutes, four times over


def test_a_restarted_worker_stops_at_the_flight_recorder_an_nccl_timeout_left(tmp_path, tiny_taxi):
    """NCCL's watchdog ends a timed-out worker before Python runs; what it leaves is its flight recorder dump
    (TORCH_FR_DUMP_TEMP_FILE<rank>, set into the run directory). Here a real recorder's dump (gloo's: the same
    format, the same writer) stands in for it."""
    job = helpers.tiny_train_job(tmp_path, tiny_taxi)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        dist.broadcast(torch.ones(2), 0)
        dist.all_reduce(torch.ones(2))
        from torch._C._distributed_c10d import _dump_fr_trace

        dump = _dump_fr_trace()
    finally:
        dist.destroy_process_group()
    run_dir = Path(job.run_dir)
    run_dir.mkdir(parents=True)
    (run_dir / f"{collectives.NCCL_TIMEOUT_DUMP_PREFIX}1").write_bytes(dump)
    with pytest.raises(collectives.CollectiveTimeout, match=r"gloo:all_reduce #\d+ .* timed out in the previous"):
        train.stop_after_nccl_timeout(job)
    cause = (run_dir / FATAL_FILE).read_text().splitlines()[0]
    assert re.match(r"rank 1: CollectiveTimeout: gloo:all_reduce #\d+ \(called at test_fatal\.py:\d+", cause), cause


def test_collective_timeouts_are_fatal_and_peer_deaths_are_not():
    gloo_timeout = RuntimeError("[../gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 3000ms for recv")
    peer_died = RuntimeError("[../gloo/transport/tcp/pair.cc:545] Read error [::1]:14740: Connection reset by peer")
    assert collectives.is_timeout(gloo_timeout) and not fatal.is_peer_failure(gloo_timeout)
    assert collectives.is_timeout(RuntimeError("Application timeout caused pair closure"))
    assert collectives.is_timeout(dist.DistStoreError("wait timeout after 600000ms, keys: /a"))
    assert not collectives.is_timeout(peer_died) and fatal.is_peer_failure(peer_died)
    assert not collectives.is_timeout(ValueError("timeout in the user's own code"))


def test_the_collective_timeout_is_a_validated_hyperparameter():
    assert TrainerHParams().collective_timeout.total_seconds() == 600
    with pytest.raises(HParamsError, match="collective_timeout_seconds: Input should be greater than 0"):
        TrainerHParams(collective_timeout_seconds=0)


def _full_disk_save(obj, file) -> None:
    """torch.save on a full volume, as measured on a tmpfs: part of the zip reaches the file, then torch's
    writer raises a RuntimeError whose context is the write's OSError(ENOSPC)."""
    file.write(b"PK\x03\x04" + bytes(4096))
    try:
        raise OSError(errno.ENOSPC, "No space left on device")
    except OSError:
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598") from None


def test_a_checkpoint_on_a_full_disk_leaves_no_temp_file_and_names_path_space_and_fix(tmp_path, monkeypatch):
    path = tmp_path / contracts.CHECKPOINT_FILE
    checkpoint.save_atomic({"epoch": 1}, path)
    monkeypatch.setattr(torch, "save", _full_disk_save)
    with pytest.raises(checkpoint.CheckpointDiskFullError) as full:
        checkpoint.save_atomic({"epoch": 2}, path)
    message = str(full.value)
    assert full.value.errno == errno.ENOSPC and full.value.filename == str(path)
    assert f"no space left on the device of {tmp_path} writing {path.name}" in message
    assert "the partial file had reached 4 KiB and was removed" in message and "B free now" in message
    assert "Free space on that volume, or give the run a larger one" in message
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no .tmp
    assert torch.load(path, weights_only=True) == {"epoch": 1}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_full_disk_at_the_checkpoint_stops_the_restarts(tmp_path, tiny_taxi, monkeypatch):
    """The worker's entry point, as torchrun starts it (rank 0 of 1): the error is recorded in the marker that
    stops the restarted workers, and the partial checkpoint is gone."""
    job = helpers.tiny_train_job(tmp_path, tiny_taxi, num_workers=1)
    for name, value in {
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(torch, "save", _full_disk_save)
    with pytest.raises(checkpoint.CheckpointDiskFullError):
        train.run(job)
    assert not dist.is_initialized()
    run_dir = Path(job.run_dir)
    cause = (run_dir / FATAL_FILE).read_text().splitlines()[0]
    assert cause.startswith(f"rank 0: CheckpointDiskFullError: [Errno 28] no space left on the device of {run_dir}")
    assert not list(run_dir.glob("*.tmp"))


def test_the_marker_stops_the_restarts_even_when_its_text_cannot_be_written(tmp_path, monkeypatch):
    def disk_full(self, text):
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_text", disk_full)
    fatal.record_fatal(tmp_path, 0, checkpoint.CheckpointDiskFullError(errno.ENOSPC, "no space"))
    monkeypatch.undo()
    marker = fatal.fatal_marker(tmp_path)
    assert marker.exists() and marker.read_text() == "" and [p.name for p in tmp_path.iterdir()] == [marker.name]
    assert "a worker's error (not recorded: disk full?)" in failure_message(1, marker, "train.log", [])


def test_a_worker_the_agent_terminates_while_a_peer_s_death_is_handled_is_not_fatal():
    """The fault test's race: rank 1 saw rank 0's death in an all-reduce, then the agent's SIGTERM arrived while
    that error was handled; torch's handler raised SignalException, which used to be recorded as fatal."""
    import signal

    from torch.distributed.elastic.multiprocessing.api import SignalException

    peer_died = RuntimeError("[../gloo/transport/tcp/pair.cc:561] Connection closed by peer [127.0.0.1]:23969")
    try:
        try:
            raise peer_died
        except RuntimeError:
            raise SignalException("Process 13947 got signal: 15", sigval=signal.SIGTERM)  # noqa: B904
    except SignalException as terminated:
        assert fatal.is_peer_failure(terminated)
    assert fatal.is_peer_failure(SignalException("Process 1 got signal: 15", sigval=signal.SIGTERM))
    assert not fatal.is_peer_failure(ValueError("the user's own bug"))
