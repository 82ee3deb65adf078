"""Which worker failures a restart can cure, and the marker that stops restarts for the others.

torchrun restarts every worker after any failure, up to ``max_restarts`` times. That cures a worker that was
killed (the OOM killer, a preempted node, ``kill -9``): the new workers resume from rank 0's checkpoint. It
cannot cure a failure the worker raised itself (bad data, a model that fails or diverges, a full disk) nor a
collective that timed out (worker/collectives.py): each attempt would fail, or wait, the same way after
resuming. Such a worker writes the marker; the restarted workers' lifeline finds it and exits at once, so the
error is reported after one attempt, not after ``max_restarts`` more.
"""

from __future__ import annotations

import logging
import os
import traceback
from pathlib import Path

import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.api import SignalException

from torchtfx.components.torch_trainer.handoff.constants import FATAL_FILE
from torchtfx.components.torch_trainer.worker.collectives import is_timeout

logger = logging.getLogger("torchtfx.train")

# What a worker sees when a peer died under it: gloo and NCCL report the broken connection in these words
# (measured with gloo: "[.../gloo/transport/tcp/pair.cc:545] Read error [127.0.0.1]:14740: Connection reset by
# peer", raised as a plain RuntimeError from the backward pass's all-reduce). A timeout is not one: a peer that
# never enters a collective is alive (is_timeout is asked first).
_PEER_GONE = (
    "connection closed by peer",
    "connection reset by peer",
    "connection refused",
    "broken pipe",
    "socket closed",
    "timed out",
    "gloo",
    "nccl",
)


def is_peer_failure(err: BaseException) -> bool:
    """True when ``err`` is another worker's death seen through a collective, or the agent terminating this
    worker, not this worker's own fault nor a collective that timed out (a peer alive but never entering it)."""
    if is_timeout(err):
        return False
    # The agent SIGTERMs the surviving ranks when one dies, and torch's handler raises SignalException in them
    # wherever they are. Measured (a fault test under load): rank 0 SIGKILLed, rank 1's all-reduce failed with
    # "Connection closed by peer", the SIGTERM arrived while that error was being handled, and the
    # SignalException was recorded as rank 1's own fatal error: the restart was refused.
    if isinstance(err, SignalException) or isinstance(err, dist.DistError):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and any(words in text for words in _PEER_GONE)


def fatal_marker(run_dir: str | Path) -> Path:
    return Path(run_dir) / FATAL_FILE


def record_fatal(run_dir: str | Path, rank: int, err: BaseException) -> None:
    """Write the marker (first writer wins; atomic, so a reader never sees half of it). On a full disk, where
    its text cannot be written, an empty marker still stops the restarts (measured: after a checkpoint filled
    a tmpfs, a 10-byte write failed with ENOSPC, no marker was left, and torchrun retried the run)."""
    marker = fatal_marker(run_dir)
    if marker.exists():
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    text = f"rank {rank}: {type(err).__name__}: {err}\n" + "".join(traceback.format_exception(err)[-6:])
    tmp = marker.with_name(f"{marker.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, marker)
    except OSError as write_error:
        tmp.unlink(missing_ok=True)
        logger.error("Could not write %s (%s); leaving it empty", marker, write_error)
        marker.touch()  # an inode and a directory entry, no data block
