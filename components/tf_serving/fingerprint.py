"""A served model's fingerprint: a content digest of its SavedModel folder, the exact bytes TF Serving loads.

Two models with the same fingerprint serve the same predictions: the folder holds the graph, the weights, the
TFT assets and the warmup requests, and a serving version is a byte copy of the candidate's ``Format-Serving``.
The MLflow Model folder is left out on purpose: it wraps a copy of the same SavedModel, and its ``MLmodel``
file names a fresh ``model_uuid``, creation time and source paths on every save, so including it would make
every retrain of a byte-identical model look new.

The digest is over the files' relative paths and contents (empty folders, which TF Serving ignores, do not
count), so a copy of the folder anywhere has the same fingerprint; any changed byte, added, removed or renamed
file changes it. A different scheme prefix never compares equal, so a future scheme cannot be mistaken for this
one.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

SCHEME = "sha256-tree-v1"
_CHUNK = 1 << 20  # read in 1 MiB pieces: a SavedModel's variables can be gigabytes


def _files(folder: Path) -> list[tuple[str, Path]]:
    found = []
    for parent, dirs, names in os.walk(folder):
        dirs.sort()
        for name in names:
            path = Path(parent) / name
            found.append((path.relative_to(folder).as_posix(), path))
    return sorted(found)


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def saved_model_fingerprint(folder: Path) -> str:
    """``sha256-tree-v1:<hex>`` of every file under ``folder``; raises FileNotFoundError for a folder without
    a saved_model.pb (nothing that could be served)."""
    if not (folder / "saved_model.pb").is_file():
        raise FileNotFoundError(f"{folder} holds no saved_model.pb; it has no model fingerprint")
    tree = hashlib.sha256()
    for relative, path in _files(folder):
        # One line per file, path and content digest separated by NUL (which no path holds): unambiguous.
        tree.update(f"{relative}\0{_file_digest(path)}\n".encode())
    return f"{SCHEME}:{tree.hexdigest()}"


def listing(folder: Path) -> list[tuple[str, int]]:
    """Each file's relative path and size: a cheap check (no reading) that a folder still holds what a
    recorded fingerprint was computed from."""
    return [(relative, path.stat().st_size) for relative, path in _files(folder)]
