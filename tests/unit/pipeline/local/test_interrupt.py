"""SIGTERM during a real ``torchtfx run`` (200 rows of the taxi CSV, stopped in its first data stage): exit
status 143 and one line naming the stage that was running and that a rerun resumes from the cache (it was a
bare 143)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.unit.pipeline.local.test_run_lock import _sample
from torchtfx.pipeline.local.interrupt import interrupted_line

TORCHTFX = Path(sys.executable).parent / "torchtfx"
STAGE = "CsvExampleGen"  # the first stage that reads data: Transform is reached ~40 s later


def test_sigterm_during_a_stage_names_it_and_says_a_rerun_resumes(tmp_path, taxi_csv):
    data = _sample(taxi_csv, tmp_path / "data")
    command = [str(TORCHTFX), "run", "--pipeline-root", str(tmp_path / "root"), "--data-dir", str(data)]
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    timer = threading.Timer(240, os.killpg, (run.pid, signal.SIGKILL))  # a run that never reaches the stage
    timer.start()
    try:
        for line in run.stdout:
            lines.append(line)
            if f"Component {STAGE} is running." in line:
                run.send_signal(signal.SIGTERM)
                break
        lines += run.stdout.readlines()
        code = run.wait()
    finally:
        timer.cancel()
    out = "".join(lines)
    assert code == 128 + signal.SIGTERM, out[-3000:]
    expected = f"torchtfx run interrupted by SIGTERM while {STAGE} was running; nothing after it ran."
    assert expected in out and "rerun the same command to resume" in out and "Traceback" not in out
    assert "Component Trainer is running." not in out and "TorchTrainer is running" not in out


@pytest.mark.parametrize(
    ("stage", "cache", "expected"),
    [
        (None, True, "interrupted by SIGINT before the first stage started"),
        ("Evaluator", False, "rerun to start again (--no-cache: nothing is reused)"),
    ],
)
def test_the_line_says_where_and_how_to_go_on(stage, cache, expected):
    assert expected in interrupted_line(signal.SIGINT, stage, cache)


INTERRUPTED_PARENT = """
import subprocess, sys, time
from torchtfx.pipeline.local.interrupt import on_interrupt
on_interrupt(cache=True)
child = subprocess.Popen("sleep 120 & sleep 120; true", shell=True)  # like Beam's `sh -c python -m sdk_worker_main`
print(child.pid, flush=True)
time.sleep(120)
"""


def test_sigterm_kills_every_process_the_run_started(tmp_path):
    """Beam's multi_processing workers outlived a SIGTERMed `torchtfx run` (tests/e2e/test_faults.py): the
    handler ends the whole tree under the run, a shell's children included, before it exits."""
    import psutil

    parent = subprocess.Popen([sys.executable, "-c", INTERRUPTED_PARENT], stdout=subprocess.PIPE, text=True)
    shell = psutil.Process(int(parent.stdout.readline()))
    tree = [shell]
    try:
        while len(tree) < 3:  # the shell and its two sleeps
            tree = [shell, *shell.children(recursive=True)]
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=30) == 128 + signal.SIGTERM
        _, alive = psutil.wait_procs(tree, timeout=10)
        assert alive == [], [p.cmdline() for p in alive]
    finally:
        for proc in tree:  # only where the test failed
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
