"""Who owns a local staging folder, so that a rerun removes what a killed ``torchtfx predict`` left behind.

A staging folder (``.<name>.incoming-<id>`` beside ``--out``) holds an ``.owner`` file that its run keeps
locked (``flock``) until it publishes or discards the folder. The kernel drops the lock when that process dies,
SIGKILL included, so a rerun for the same ``--out`` removes every sibling staging folder whose ``.owner`` it can
lock, and leaves alone one whose run is still going. A lock, not a recorded pid: a pid is reused by another
process, and a folder on a shared filesystem may be another host's; ``.owner`` also names the pid, host and start
time for a human. The folder appears with its ``.owner`` already locked (made under another name, then renamed),
so no rerun can take a starting run's folder for a dead one. A Beam filesystem URI (gs://, s3://) has no locks:
its staging is left as it was.
"""

from __future__ import annotations

import fcntl
import glob
import logging
import os
import shutil
import socket
import time
from typing import IO

logger = logging.getLogger(__name__)

OWNER_FILE = ".owner"
INCOMING, CLAIMING = "incoming", "claiming"


def staging_name(out_name: str, suffix: str) -> str:
    return f".{out_name}.{INCOMING}-{suffix}"


def claim(staging: str) -> IO[str]:
    """Create ``staging`` holding a locked ``.owner``; the returned handle keeps the lock until it is closed."""
    parent, name = os.path.split(staging)
    os.makedirs(parent, exist_ok=True)
    head, _, suffix = name.rpartition(f".{INCOMING}-")
    pending = os.path.join(parent, f"{head}.{CLAIMING}-{suffix}")
    os.mkdir(pending)  # the umask's mode, as Beam's own folder had: a folder --out keeps it
    handle = open(os.path.join(pending, OWNER_FILE), "w")  # held open for the run: it is the lock
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        handle.write(f"torchtfx predict, pid {os.getpid()} on {socket.gethostname()}, since {started}\n")
        handle.flush()
        os.rename(pending, staging)
    except BaseException:
        handle.close()
        shutil.rmtree(pending, ignore_errors=True)
        raise
    return handle


def _owner_gone(folder: str) -> bool:
    """True when ``folder``'s ``.owner`` is not locked: the run that made it has ended."""
    try:
        fd = os.open(os.path.join(folder, OWNER_FILE), os.O_RDONLY)
    except OSError:  # none (a folder from before owners, or published meanwhile): not ours to judge
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def remove_stale(out: str) -> list[str]:
    """Remove the staging folders of ``out`` (a local path) whose run has ended; returns them."""
    parent, name = os.path.split(out)
    found = [
        path
        for kind in (INCOMING, CLAIMING)
        for path in glob.glob(os.path.join(glob.escape(parent), f".{glob.escape(name)}.{kind}-*"))
    ]
    stale = sorted(path for path in found if os.path.isdir(path) and _owner_gone(path))
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    if stale:
        logger.warning(
            "Removed %d staging folder(s) of %s left by a torchtfx predict that did not finish: %s",
            len(stale),
            out,
            ", ".join(stale),
        )
    return stale
