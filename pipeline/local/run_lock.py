"""One ``torchtfx run`` at a time on a pipeline root: a lock file held for the whole run, naming its holder.

Two runs on one root shared MLMD's "latest run" (the finished run printed and reported the other run's
summary) and, on a fresh root, migrated the new MLflow sqlite store at once (``duplicate column name: step``).
A second run therefore refuses at once, naming the holder (pid, start time, command), rather than waiting: the
first run takes minutes to hours, and a run that would start on its results later is seldom what was meant.

The lock is ``fcntl.flock`` on an open file (as the serving directory's promotion lock,
``components/tf_serving/layout.py``): the kernel releases it when the holder exits, SIGKILL included, so a
stale file never blocks a run. The file descriptor is not inherited across exec (Python's default).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import logging
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

LOCK_FILE = ".run.lock"


class RootBusyError(RuntimeError):
    """Another ``torchtfx run`` holds this pipeline root."""


def _command_line() -> str:
    """This process's command line as started (``main()`` trims ``sys.argv`` for absl, /proc keeps it)."""
    try:
        args = Path("/proc/self/cmdline").read_bytes().decode(errors="replace").split("\0")
        args = [arg for arg in args if arg]
    except OSError:
        args = list(sys.argv)
    return shlex.join(args)


def holder_record() -> str:
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return f"pid {os.getpid()}, started {started}, command: {_command_line()}\n"


def _refusal(root: Path, path: Path) -> RootBusyError:
    try:
        holder = path.read_text().strip()
    except OSError:
        holder = ""
    holder = holder or "a process that is still writing its record"
    return RootBusyError(
        f"another torchtfx run holds the pipeline root {root} ({holder}); two runs on one root would mix their "
        f"records. Wait for it to finish (or stop it), or give this run another --pipeline-root. The lock "
        f"({path}) is released when its holder exits, even when killed"
    )


@contextlib.contextmanager
def run_lock(root: Path) -> Iterator[None]:
    """Hold ``<root>/.run.lock`` for the block; raise :class:`RootBusyError` at once if another process holds it."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / LOCK_FILE
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _refusal(root, path) from None
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(holder_record())
            handle.flush()
            yield
        finally:
            with contextlib.suppress(OSError):
                handle.seek(0)
                handle.truncate()  # an idle root's lock file names nobody
            fcntl.flock(handle, fcntl.LOCK_UN)
