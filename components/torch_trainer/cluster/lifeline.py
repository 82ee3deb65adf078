"""Tie a process's life to its parent's: ``python -m <this module> [--unless-exists PATH] COMMAND...``.

It asks the kernel for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``), checks that the parent it was
started by is still alive, then execs COMMAND: same process id, and the setting survives the exec.

Why: the executor starts the DDP agent in a session of its own (so that ending it ends its workers); when the
pipeline process died (``kill -9``, the OOM killer) nothing signalled them: after ``make test-faults``
two workers of about 680 MB each were still alive 35 minutes later, reparented to init. The agent starts through
this module; the workers it forks arm the same signal in-process (``die_with_parent`` in cluster/agent.py), so
each process dies with the one that started it.

``PR_SET_PDEATHSIG`` fires when the parent *thread* that forked the child ends, not the parent process. Both
links are safe: the executor thread that starts the agent waits for it to end, and the elastic agent forks (and
re-forks) its workers from its main thread.

``--unless-exists PATH``: when PATH exists, print it and exit 1 instead of starting COMMAND. The workers use it
to stop at once after a failure that a restart would only repeat (see ``worker/fatal.py``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

# The pid each process expects as its parent; set for the agent by the executor, for the workers by the agent's
# own lifeline (it becomes the agent when it execs).
PARENT_PID_ENV = "TORCHTFX_PARENT_PID"
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
MODULE = "torchtfx.components.torch_trainer.cluster.lifeline"


def die_with_parent(expected_parent: int | None) -> bool:
    """SIGKILL this process when its parent thread ends. False where the platform has no ``prctl`` (macOS).
    Exits at once when the parent already died: then no signal would ever come."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (AttributeError, OSError):
        return False
    if prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if expected_parent and os.getppid() != expected_parent:
        # The parent died between our fork and the prctl, so we were reparented before the kernel could arm it.
        os._exit(1)
    return True


def wrap(command: list[str], unless_exists: Path | None = None) -> list[str]:
    """``command`` started through this module, with this interpreter."""
    guard = ["--unless-exists", str(unless_exists)] if unless_exists else []
    return [sys.executable, "-m", MODULE, *guard, *command]


def exit_if_exists(stop: Path) -> None:
    """Exit 1, printing ``stop``, when it exists: the marker of a failure a restart would only repeat."""
    if stop.exists():
        print(f"Not started: {stop} exists:\n{stop.read_text()}", file=sys.stderr, flush=True)
        sys.exit(1)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--unless-exists"]:
        exit_if_exists(Path(argv[1]))
        argv = argv[2:]
    die_with_parent(int(os.environ.get(PARENT_PID_ENV) or 0) or None)
    os.environ[PARENT_PID_ENV] = str(os.getpid())  # what COMMAND's own children check against
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
