"""Start the DDP workers with torch's elastic launcher (torchrun semantics) and stream their logs."""

from __future__ import annotations

import collections
import logging
import os
import subprocess
import sys
from pathlib import Path

from torchtfx.components.torch_trainer.constants import WORKER_MODULE
from torchtfx.components.torch_trainer.worker.job import TrainJob

logger = logging.getLogger(__name__)


class TrainingFailedError(RuntimeError):
    """The DDP workers exited with an error; the message carries the tail of their log."""


def torchrun_command(job_path: Path, job: TrainJob) -> list[str]:
    hp = job.hparams
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--standalone", "--nnodes=1",
        f"--nproc-per-node={hp.num_workers}",
        f"--max-restarts={hp.max_restarts}",
        "-m", WORKER_MODULE, "--job", str(job_path),
    ]  # fmt: skip


def worker_env(threads_per_worker: int) -> dict[str, str]:
    env = dict(os.environ)
    # One BLAS/OpenMP pool per worker sized to its share of the cores; torchrun would otherwise
    # warn and set 1, and TF's env noise is irrelevant to the workers.
    env["OMP_NUM_THREADS"] = str(threads_per_worker)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def launch(job: TrainJob, job_path: Path, log_path: Path) -> None:
    """Run the job; worker output goes to the logger and to ``log_path``. Raises on failure."""
    job.save(job_path)
    command = torchrun_command(job_path, job)
    logger.info("Starting %s DDP workers: %s", job.hparams.num_workers, " ".join(command))
    tail: collections.deque[str] = collections.deque(maxlen=40)
    with (
        log_path.open("w") as log,
        subprocess.Popen(
            command,
            env=worker_env(job.hparams.threads_per_worker),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        ) as proc,
    ):
        for line in proc.stdout:
            log.write(line)
            log.flush()  # so `tail -f train.log` shows progress as it happens
            tail.append(line.rstrip())
            logger.info("%s", line.rstrip())
        code = proc.wait()
    if code != 0:
        raise TrainingFailedError(
            f"DDP training failed (torchrun exit code {code}); full log: {log_path}\n" + "\n".join(tail)
        )
