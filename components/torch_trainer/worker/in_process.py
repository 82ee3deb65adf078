"""One worker in the executor's own process: the same Trainer as under torchrun, in a process group of one.

For small data (``num_workers: auto`` below ``IN_PROCESS_MAX_TRAIN_ROWS`` training rows) torchrun costs more
than it gives: on taxi its agent and two workers took about 11 s to start and 2.6 GiB of RSS (each imports
torch) for about 1 s of training. Here nothing starts: the executor already imported torch for the parity gate.
The process group (gloo over an in-memory store, world size 1) keeps the Trainer's code path one and the same.
Its collectives cannot hang: with no other rank, gloo completes each one locally without waiting on a peer;
the group still gets the configured ``collective_timeout_seconds``, as every group does.
"""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist

from torchtfx.components.shared.mlflow_client import RedactCredentials
from torchtfx.components.torch_trainer.handoff.errors import TrainingFailedError
from torchtfx.components.torch_trainer.handoff.job import TrainJob
from torchtfx.components.torch_trainer.worker import train
from torchtfx.components.torch_trainer.worker.distributed import DistContext

TRAIN_LOGGER = "torchtfx.train"


class InProcessTrainingError(TrainingFailedError):
    """The in-process worker raised; the message names the exception and the log."""


@contextlib.contextmanager
def _logged_to(log_path: Path) -> Iterator[logging.FileHandler]:
    """The worker's log lines go to ``log_path`` too, as torchrun's output does on the DDP path."""
    handler = logging.FileHandler(log_path, mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s [in process] %(levelname)s %(message)s"))
    handler.addFilter(RedactCredentials())  # train.log is kept beside the pipeline root: no user:password@ in it
    logger = logging.getLogger(TRAIN_LOGGER)
    level = logger.level
    logger.setLevel(logging.INFO)  # the progress lines a worker's log has, whatever the caller's logging
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        handler.close()


@contextlib.contextmanager
def _threads(count: int) -> Iterator[None]:
    """torch's intra-op threads for the training, then back to what the process had."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_in_process(job: TrainJob, log_path: Path, shown_log: str | None = None, threads: int | None = None) -> None:
    """Train ``job`` here as rank 0 of 1; writes the same result, checkpoint and export as a DDP run.
    ``threads``: torch's intra-op threads while training (default: the job's ``threads_per_worker``)."""
    if dist.is_initialized():  # a caller's own group: one process holds one default group
        raise InProcessTrainingError("a torch.distributed process group is already active in this process")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with _logged_to(log_path) as log, _threads(threads or job.hparams.threads_per_worker):
        dist.init_process_group(
            "gloo", store=dist.HashStore(), rank=0, world_size=1, timeout=job.hparams.collective_timeout
        )
        try:
            train.train_and_publish(job, DistContext(0, 0, 1, torch.device("cpu")))
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as err:
            # The traceback goes to the log file only, as a worker's does; the console gets the one-line error.
            log.stream.write(f"in-process training failed:\n{traceback.format_exc()}")
            log.flush()
            message = f"training failed in process: {type(err).__name__}: {err}\nfull log: {shown_log or log_path}"
            raise InProcessTrainingError(message) from err
        finally:
            dist.destroy_process_group()
