"""The serving directory TF Serving watches: integer version folders (numbers never reused), the atomic writes of
every file in it, and the lock that lets one promotion at a time change them (ChampionModel reads the same
layout; ``model_config`` and ``batching`` write the files TF Serving reads).

Every write is atomic (temp file or folder, then rename on the same filesystem), so TF Serving or
any reader never sees a partial version folder or a half-written config.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

TMP_PREFIX = ".incoming-"


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; the model server may run as another user
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def versions(serving_dir: Path) -> list[int]:
    """Integer version folders that hold a complete SavedModel, ascending."""
    if not serving_dir.is_dir():
        return []
    found = [int(p.name) for p in serving_dir.iterdir() if p.is_dir() and p.name.isdigit()]
    return sorted(v for v in found if (serving_dir / str(v) / "saved_model.pb").is_file())


VERSION_COUNTER = ".last_version"


def next_version(serving_dir: Path) -> int:
    """Strictly increasing, never reused: one above any version folder present and any number ever
    handed out (kept in a counter file, so an undone promotion's number is not served later)."""
    taken = [int(p.name) for p in serving_dir.iterdir() if p.name.isdigit()] if serving_dir.is_dir() else []
    counter = serving_dir / VERSION_COUNTER
    last = int(counter.read_text()) if counter.is_file() else 0
    version = max([*taken, last], default=0) + 1
    write_text_atomic(counter, str(version))
    return version


def push_version(saved_model_dir: Path, serving_dir: Path, version: int) -> Path:
    """Copy a SavedModel into ``<serving_dir>/<version>/`` atomically (copy aside, then rename)."""
    if not (saved_model_dir / "saved_model.pb").is_file():
        raise FileNotFoundError(f"{saved_model_dir} holds no saved_model.pb; nothing to push")
    target = serving_dir / str(version)
    if target.exists():
        raise FileExistsError(f"serving version {target} already exists; versions are never overwritten")
    serving_dir.mkdir(parents=True, exist_ok=True)
    staging = serving_dir / f"{TMP_PREFIX}{version}-{uuid.uuid4().hex[:8]}"
    try:
        shutil.copytree(saved_model_dir, staging)
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def remove_stale_staging(serving_dir: Path) -> None:
    """Staging folders left by a crash mid-copy never became versions; drop them."""
    if serving_dir.is_dir():
        for path in serving_dir.glob(f"{TMP_PREFIX}*"):
            shutil.rmtree(path, ignore_errors=True)


LOCK_FILE = ".promotion.lock"


@contextlib.contextmanager
def promotion_lock(serving_dir: Path) -> Iterator[None]:
    serving_dir.mkdir(parents=True, exist_ok=True)
    with open(serving_dir / LOCK_FILE, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("Waiting for another promotion on %s to finish", serving_dir)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
