"""What a stopped ``torchtfx run`` says: SIGTERM (or Ctrl-C) ends it with one line naming the stage that was
running and how a rerun goes on, instead of a bare exit status 143.

The running stage is read off TFX's LocalDagRunner's own line ("Component %s is running.", absl's logger), so
nothing inside TFX is patched. The handler exits at once with ``os._exit(128 + signal)``, as the default action
did: TFX and Beam catch broad exceptions in places, so an exception raised from a handler might not end the run.
Completed stages are in ML Metadata already; the interrupted one is run again by the next run. Before it exits,
the handler SIGKILLs every process the run started: Beam's multi_processing workers (``sh -c python -m
...sdk_worker_main``) outlived a SIGTERMed run by 30 s and more (tests/e2e/test_faults.py).
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path

STAGE_RUNNING = "Component %s is running."  # tfx/orchestration/local/local_dag_runner.py
TFX_LOGGER = "absl"


class StageTracker(logging.Filter):
    """Remembers the stage TFX's local runner said it started last (lets every record through)."""

    def __init__(self) -> None:
        super().__init__()
        self.stage: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == STAGE_RUNNING and record.args:
            self.stage = str(record.args[0])
        return True


def interrupted_line(signum: int, stage: str | None, cache: bool) -> str:
    name = signal.Signals(signum).name
    where = f"while {stage} was running" if stage else "before the first stage started"
    if cache:
        after = "rerun the same command to resume: the stages that completed come from the cache"
    else:
        after = "rerun to start again (--no-cache: nothing is reused)"
    return f"torchtfx run interrupted by {name} {where}; nothing after it ran. To go on, {after}."


def on_interrupt(cache: bool, before_exit: Callable[[], None] | None = None) -> StageTracker:
    """Install SIGTERM and SIGINT handlers that print :func:`interrupted_line` on stderr and exit 128 + signal
    (143 for SIGTERM, 130 for SIGINT); ``before_exit`` runs first (the CLI restores stderr with it)."""
    tracker = StageTracker()
    logging.getLogger(TFX_LOGGER).addFilter(tracker)
    owner = os.getpid()

    def handle(signum: int, _frame) -> None:
        signal.signal(signum, signal.SIG_DFL)  # a second signal ends the process by the default action
        if os.getpid() != owner:  # a forked child (a DDP worker) inherited the handler: the default action
            os.kill(os.getpid(), signum)
            return
        if before_exit is not None:
            before_exit()
        kill_descendants(owner)
        os.write(2, (interrupted_line(signum, tracker.stage, cache) + "\n").encode())  # no buffer to re-enter
        os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handle)
    return tracker


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (zombies included), read from /proc (empty where there is none: macOS)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        except (OSError, IndexError):
            continue  # ended while we read
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def kill_descendants(pid: int) -> None:
    for child in descendants(pid):
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
