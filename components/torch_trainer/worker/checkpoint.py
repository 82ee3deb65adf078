"""Rank 0's checkpoint after each epoch, what a restarted worker resumes from, and its summary for people.

The checkpoint holds everything the loop needs to continue exactly where it stopped (weights, optimizer,
scaler, schedule, early-stopping state, history, RNG). Next to it, ``checkpoint.json`` says in plain JSON
which epoch it holds and how training went; the executor keeps it with the log when a run fails, because TFX
deletes a failed execution's outputs (the checkpoint with them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from torchtfx.components.torch_trainer.constants import CHECKPOINT_META_FILE


def save_atomic(obj: object, path: Path) -> None:
    """Write to a temp file then rename: a crash never leaves a torn checkpoint behind."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


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
