"""Rank 0's checkpoint after each epoch, what a restarted worker resumes from, and its summary for people.

The checkpoint holds everything the loop needs to continue exactly where it stopped (weights, optimizer,
scaler, schedule, early-stopping state, history, RNG). Next to it, ``checkpoint.json`` says in plain JSON
which epoch it holds and how training went; the executor keeps it with the log when a run fails, because TFX
deletes a failed execution's outputs (the checkpoint with them).

A write that fails leaves no temp file behind. On a full disk it stops the run: measured on a full tmpfs,
``torch.save`` to a path raised ``RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 704
vs 598``, with no errno, and left the partial ``.tmp`` holding the last free bytes, so even the fatal marker
could not be written and torchrun restarted into the same full disk. Given an open file, the same error
carries the ``OSError(ENOSPC)`` it came from, which names the cause.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import torch

from torchtfx.components.torch_trainer.handoff.constants import CHECKPOINT_META_FILE

_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class CheckpointDiskFullError(OSError):
    """The checkpoint's volume is full: the message names the path, the free space and the fix."""


def _disk_full(err: BaseException | None) -> bool:
    """ENOSPC or EDQUOT, raised directly or as the cause of torch's writer error."""
    while err is not None:
        if isinstance(err, OSError) and err.errno in _DISK_FULL:
            return True
        err = err.__cause__ or err.__context__
    return False


def _size(size: int) -> str:
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.0f} KiB"


def _write_atomic(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write to a temp file then rename: a crash never leaves a torn checkpoint behind, a failed write no temp file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    # The run folder exists only once something created it (the MLflow run id file did): a run left untracked
    # (MLflow unreachable, policy 'continue') failed at its first checkpoint with FileNotFoundError.
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with tmp.open("wb") as file:
            write(file)
    except BaseException as err:
        written = tmp.stat().st_size if tmp.exists() else 0
        tmp.unlink(missing_ok=True)
        if _disk_full(err):
            free = shutil.disk_usage(path.parent).free
            raise CheckpointDiskFullError(
                errno.ENOSPC,
                f"no space left on the device of {path.parent} writing {path.name} (the partial file had reached "
                f"{_size(written)} and was removed; {_size(free)} free now). Free space on that volume, or give the "
                "run a larger one (the pipeline root, or the Kubeflow staging volume), and rerun; not retried: a "
                "restart would fill the same disk",
                str(path),
            ) from err
        raise
    os.replace(tmp, path)


def save_atomic(obj: object, path: Path) -> None:
    """``torch.save`` through a temp file (an open file: its errors keep their errno)."""
    _write_atomic(path, lambda file: torch.save(obj, file))


def write_text_atomic(path: Path, text: str) -> None:
    _write_atomic(path, lambda file: file.write(text.encode()))


def summary(state: dict, path: Path) -> dict:
    """The checkpoint's state in numbers: the last completed epoch (1-based), early stopping, the history."""
    return {
        "checkpoint": str(path),
        "last_completed_epoch": int(state["epoch"]) + 1,
        "best_eval_loss": float(state["best_loss"]),
        "epochs_without_improvement": int(state["bad_epochs"]),
        "restart": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
        "history": state["history"],
    }


def save_checkpoint(state: dict, path: Path) -> None:
    """The checkpoint, then its summary (``checkpoint.json`` in the same folder)."""
    save_atomic(state, path)
    write_text_atomic(path.parent / CHECKPOINT_META_FILE, json.dumps(summary(state, path), indent=2))


def load_checkpoint(path: Path, device: torch.device) -> dict | None:
    """The last checkpoint, or None before the first epoch ended."""
    if not path.exists():
        return None
    return torch.load(path, map_location=device, weights_only=True)
