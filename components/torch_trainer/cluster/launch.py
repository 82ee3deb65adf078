"""Start the DDP workers with torch's elastic launcher (torchrun semantics) and stream their logs.

Every process dies with the one that started it (``lifeline``): the agent with the executor, each worker with
the agent. The agent runs in a process group of its own, which the executor ends whenever it stops waiting
for it (an exception, Ctrl-C), so no worker outlives the run that started it.
"""

from __future__ import annotations

import collections
import collections.abc
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from torchtfx.components.torch_trainer.cluster import lifeline
from torchtfx.components.torch_trainer.handoff.constants import AGENT_MODULE, FATAL_FILE
from torchtfx.components.torch_trainer.handoff.errors import TrainingFailedError
from torchtfx.components.torch_trainer.handoff.hparams import IN_PROCESS_MAX_TRAIN_ROWS, TrainerHParams
from torchtfx.components.torch_trainer.handoff.job import TrainJob

logger = logging.getLogger(__name__)

# SIGTERM lets torchrun stop its workers; past this many seconds the agent's group is killed.
STOP_GRACE_SECONDS = 15


def ddp_workers(hp: TrainerHParams) -> int:
    """The workers torchrun starts: the number asked for, or for ``auto`` the DDP choice (one per GPU, else
    ``CPU_WORKERS``); the executor decides before this whether small data trains in its own process."""
    import torch

    return (
        hp.workers_for(IN_PROCESS_MAX_TRAIN_ROWS, torch.cuda.device_count())
        if hp.num_workers == "auto"
        else (hp.num_workers)
    )


def agent_command(job_path: Path, job: TrainJob) -> list[str]:
    """The local agent (cluster/agent.py: torchrun's elastic agent, the workers forked from it), behind a
    lifeline; a restarted worker first checks the marker of a failure that restarting cannot cure (worker/fatal.py)."""
    hp = job.hparams
    marker = Path(job.run_dir) / FATAL_FILE
    return lifeline.wrap(
        [
            sys.executable,
            "-u",
            "-m",
            AGENT_MODULE,
            f"--nproc-per-node={ddp_workers(hp)}",
            f"--max-restarts={hp.max_restarts}",
            "--fatal-marker",
            str(marker),
            "--job",
            str(job_path),
        ]
    )


def worker_env(threads_per_worker: int) -> dict[str, str]:
    env = dict(os.environ)
    # One BLAS/OpenMP pool per worker sized to its share of the cores; torchrun would otherwise
    # warn and set 1, and TF's env noise is irrelevant to the workers.
    env["OMP_NUM_THREADS"] = str(threads_per_worker)
    env["PYTHONUNBUFFERED"] = "1"
    env[lifeline.PARENT_PID_ENV] = str(os.getpid())  # the agent's lifeline checks it is still our child
    return env


def stop_agent(proc: subprocess.Popen) -> None:
    """End the agent's process group: SIGTERM (torchrun stops its workers), then SIGKILL after the grace
    period. The workers die with the agent in any case (lifeline)."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_SECONDS), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def launch(job: TrainJob, job_path: Path, log_path: Path, shown_log: str | None = None) -> None:
    """Run the job; worker output goes to the logger and to ``log_path``. Raises on failure, naming
    ``shown_log`` (default ``log_path``) as the full log: where the log is kept after a failed run."""
    job.save(job_path)
    command = agent_command(job_path, job)
    logger.info("Starting %s DDP workers: %s", ddp_workers(job.hparams), " ".join(command))
    tail: collections.deque[str] = collections.deque(maxlen=40)
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            command,
            env=worker_env(job.hparams.threads_per_worker),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        try:
            for line in proc.stdout:
                log.write(line)
                log.flush()  # so `tail -f train.log` shows progress as it happens
                tail.append(line.rstrip())
                logger.info("%s", line.rstrip())
            code = proc.wait()
        finally:
            stop_agent(proc)
            proc.stdout.close()
    if code != 0:
        marker = Path(job.run_dir) / FATAL_FILE
        raise TrainingFailedError(failure_message(code, marker, shown_log or str(log_path), tail))


def failure_message(code: int, marker: Path, shown_log: str, tail: collections.abc.Iterable[str]) -> str:
    """The cause a worker recorded (its exception; torchrun's own tail after the restarts it stopped only
    repeats "child failed"), else the log's last lines (a worker killed more often than the restart budget)."""
    if marker.exists():
        # Empty: the worker could not write its error into it (a full disk, worker/fatal.py).
        cause = next(iter(marker.read_text().splitlines()), "a worker's error (not recorded: disk full?)")
        return f"DDP training failed (torchrun exit code {code}): {cause}\nfull log: {shown_log}"
    return f"DDP training failed (torchrun exit code {code}); full log: {shown_log}\n" + "\n".join(tail)
