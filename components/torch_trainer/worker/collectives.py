"""Collective timeouts: which collective a rank was stuck in, and the error that says so.

A rank whose collective times out waited ``collective_timeout_seconds`` for another rank that never entered
it: a rank stuck outside the collectives (an endless loop, a deadlock, a read that never returns) or ranks
calling different collectives. A restart runs the same code into the same wait, so a timeout is fatal
(worker/fatal.py), never retried.

What torch reports is too little to act on. Measured with gloo (torch 2.14, 2 ranks, one never entering an
all-reduce): a plain ``RuntimeError: [.../gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 3000ms
for recv operation to complete``, and ``Application timeout caused pair closure`` from the next collective; no
op, no sequence number. torch's flight recorder (on by default, 2000 entries, for gloo and NCCL alike) keeps
both: every collective this process issued with its op name, its sequence number, the Python stack that
issued it, and the number of the last one that completed.

NCCL runs collectives on the GPU, where the Python thread never sees the wait: torch's watchdog thread finds
the timeout and tears the process down (``TORCH_NCCL_ASYNC_ERROR_HANDLING=3``, torch's default, pinned here:
after a timed-out NCCL collective, CUDA state is not safe to continue with, which rules out CleanUpOnly and a
blocking ``wait()``, which DDP's bucket all-reduces never call). Before it does, it writes the flight recorder
to ``TORCH_FR_DUMP_TEMP_FILE<rank>``, here in the run directory; the restarted workers find that dump and
stop with the timeout as the run's error instead of training into the same hang.
"""

from __future__ import annotations

import datetime
import logging
import os
import pickle
from pathlib import Path

import torch.distributed as dist

logger = logging.getLogger("torchtfx.train")

# The flight recorder dump NCCL's watchdog writes on a timeout: <run_dir>/<prefix><rank>.
NCCL_TIMEOUT_DUMP_PREFIX = "collective_timeout_rank_"
# What torch says on a timeout: gloo "Timed out waiting 3000ms for recv operation to complete" (measured), then
# "Application timeout caused pair closure" (measured, the next collective); NCCL's watchdog "Watchdog caught
# collective operation timeout"; the store (a DistStoreError) "Socket Timeout", "wait timeout after 600000ms".
_TIMEOUT_PHRASES = ("timed out waiting", "application timeout", "collective operation timeout")
_STORE_TIMEOUT_WORDS = ("timed out", "timeout")


class CollectiveTimeout(RuntimeError):
    """A collective did not complete within the configured timeout; the message names rank and collective."""


def is_timeout(err: BaseException | None) -> bool:
    """True when ``err`` (or an error it was raised from) is torch.distributed's timeout, not a user's error."""
    while err is not None:
        text = str(err).lower()
        if (
            isinstance(err, CollectiveTimeout)
            or (isinstance(err, dist.DistError) and any(words in text for words in _STORE_TIMEOUT_WORDS))
            or (isinstance(err, RuntimeError) and any(phrase in text for phrase in _TIMEOUT_PHRASES))
        ):
            return True
        err = err.__cause__
    return False


def nccl_error_handling(run_dir: str | Path) -> None:
    """Before an NCCL group is created: a timed-out collective ends the process (torch's default, kept even
    where the environment says otherwise), after the flight recorder was written to the run directory, where
    the restarted workers look for it."""
    os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "3"
    os.environ["TORCH_NCCL_DUMP_ON_TIMEOUT"] = "1"
    for name in ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"):  # torch 2.14's name, the older one
        os.environ[name] = str(Path(run_dir) / NCCL_TIMEOUT_DUMP_PREFIX)


def _trace() -> dict | None:
    """This process's flight recorder: its collectives and each group's last completed one."""
    try:
        from torch._C._distributed_c10d import _dump_fr_trace

        return pickle.loads(_dump_fr_trace(True, True, False))
    except Exception:
        logger.debug("No flight recorder trace", exc_info=True)
        return None


def stuck_collective(trace: dict | None) -> str | None:
    """The first collective issued but not completed, as ``gloo:all_reduce #12 (called at train.py:171 in
    _train_epoch)``; None when the trace has none (recorder disabled: ``TORCH_FR_BUFFER_SIZE=0``)."""
    if not trace or not trace.get("entries"):
        return None
    status = trace.get("pg_status", {})

    def completed(entry: dict) -> int:
        return status.get(str(entry.get("pg_id")), {}).get("last_completed_collective", -1)

    pending = [entry for entry in trace["entries"] if entry.get("collective_seq_id", 0) > completed(entry)]
    entry = (pending or trace["entries"])[0 if pending else -1]
    return f"{entry['profiling_name']} #{entry['collective_seq_id']}{_caller(entry.get('frames') or [])}"


def _caller(frames: list[dict]) -> str:
    """The innermost frame outside torch itself: the line of this project (or the user's model) that issued it."""
    for frame in frames:
        if f"{os.sep}torch{os.sep}" not in frame.get("filename", ""):
            return f" (called at {Path(frame['filename']).name}:{frame['line']} in {frame['name']})"
    return ""


def describe_timeout(timeout: datetime.timedelta, err: BaseException, trace: dict | None = None) -> str:
    """A collective timeout's message (the fatal marker adds the rank): the collective, the limit and its
    setting, torch's own words."""
    collective = stuck_collective(trace if trace is not None else _trace()) or "a collective"
    seconds = int(timeout.total_seconds())
    return (
        f"{collective} did not complete within {seconds} s (collective_timeout_seconds): another "
        "rank never entered it (stuck outside the collectives, or calling a different one). Not retried: a "
        f"restart would wait the same way. torch: {err}"
    )


def earlier_nccl_timeout(run_dir: str | Path) -> tuple[int, CollectiveTimeout] | None:
    """The rank and timeout an earlier attempt's NCCL watchdog recorded before tearing its process down."""
    for dump in sorted(Path(run_dir).glob(f"{NCCL_TIMEOUT_DUMP_PREFIX}*")):
        rank = dump.name.removeprefix(NCCL_TIMEOUT_DUMP_PREFIX)
        try:
            trace = pickle.loads(dump.read_bytes())
        except Exception:
            trace = None
        collective = stuck_collective(trace) or "a collective"
        return int(rank) if rank.isdigit() else -1, CollectiveTimeout(
            f"{collective} timed out in the previous attempt (NCCL watchdog; flight recorder: {dump}): another "
            "rank never entered it. Not retried: a restart would wait the same way."
        )
    return None
