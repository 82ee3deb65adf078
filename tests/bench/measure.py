"""Timing and memory of a command: wall time and the peak RSS summed over its whole process tree."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import threading
import time
from pathlib import Path

import psutil

logger = logging.getLogger(__name__)

_SAMPLE_SECONDS = 0.25


@dataclasses.dataclass(frozen=True)
class ProcessRun:
    command: list[str]
    returncode: int
    wall_seconds: float
    peak_rss_bytes: int  # the largest sum of RSS over the process and all its descendants at one instant
    log: str
    peak_at_seconds: float = 0.0
    peak_breakdown: dict[str, int] = dataclasses.field(default_factory=dict)  # "pid command" -> RSS at the peak
    # Of the peak, the file-backed and shared pages (statm's "shared": mostly TF's and torch's libraries, which
    # every process maps and RSS counts once per process).
    peak_shared_bytes: int = 0
    # The largest sum of PSS (proportional set size) over the tree: each shared page is split among the
    # processes that map it, so libraries count once in all. This is what the tree really costs the machine.
    peak_pss_bytes: int = 0

    @property
    def peak_rss_gib(self) -> float:
        return self.peak_rss_bytes / 2**30


class TreeRssSampler:
    """Polls the RSS of a process and its descendants; Beam and DDP workers are child processes, so the
    parent's own ``ru_maxrss`` would miss most of the memory."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.peak = 0
        self.peak_breakdown: dict[str, int] = {}
        self.peak_at_seconds = 0.0
        self.peak_shared = 0
        self.peak_pss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _tree_rss(self) -> tuple[int, dict[str, int], int, int]:
        """Total RSS, RSS per process (``pid command``), the shared part of the total, and the total PSS."""
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0, {}, 0, 0
        each, shared, pss = {}, 0, 0
        for proc in procs:
            try:
                info = proc.memory_full_info()  # /proc/PID/smaps_rollup: adds PSS to statm's fields
                # The name too: a forked DDP worker keeps the agent's command line (cluster/agent.py names it).
                each[f"{proc.pid} [{proc.name()}] {' '.join(proc.cmdline())[:120]}"] = info.rss
                shared += info.shared
                pss += info.pss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return sum(each.values()), each, shared, pss

    def _poll(self) -> None:
        started = time.perf_counter()
        while not self._stop.is_set():
            total, each, shared, pss = self._tree_rss()
            self.peak_pss = max(self.peak_pss, pss)
            if total > self.peak:
                # Which processes held the memory at the peak, and when: the evidence for where it goes.
                self.peak, self.peak_breakdown, self.peak_shared = total, each, shared
                self.peak_at_seconds = time.perf_counter() - started
            self._stop.wait(_SAMPLE_SECONDS)

    def __enter__(self) -> TreeRssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def run_measured(
    command: list[str], log_path: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> ProcessRun:
    """Run ``command`` to completion with its output in ``log_path``; never raises on a failed command."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    logger.info("Running %s (log: %s)", " ".join(command), log_path)
    started = time.perf_counter()
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=cwd
        )
        with TreeRssSampler(proc.pid) as sampler:
            returncode = proc.wait()
    wall = time.perf_counter() - started
    return ProcessRun(
        command,
        returncode,
        wall,
        sampler.peak,
        str(log_path),
        sampler.peak_at_seconds,
        sampler.peak_breakdown,
        sampler.peak_shared,
        sampler.peak_pss,
    )


def require_success(run: ProcessRun, what: str) -> None:
    if run.returncode != 0:
        tail = Path(run.log).read_text().splitlines()[-25:]
        raise RuntimeError(f"{what} failed (exit code {run.returncode}); log {run.log}:\n" + "\n".join(tail))
