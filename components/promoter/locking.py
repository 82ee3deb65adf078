"""One promotion at a time per serving directory: an exclusive ``flock`` held for the whole change."""

from __future__ import annotations

import contextlib
import fcntl
import logging
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

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
