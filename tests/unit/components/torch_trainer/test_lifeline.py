"""Processes die with the one that started them: real processes, real SIGKILL, no torch (fast)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from torchtfx.components.torch_trainer.cluster import lifeline

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

# A parent that starts a child through the lifeline, which starts a grandchild through the lifeline in a session
# of its own (as torchrun starts its workers), then prints both pids and waits.
PARENT = """
import os, subprocess, sys
from torchtfx.components.torch_trainer.cluster import lifeline
child_code = '''
import subprocess, sys, time
from torchtfx.components.torch_trainer.cluster import lifeline
grandchild = subprocess.Popen(lifeline.wrap([sys.executable, "-c", "import time; time.sleep(600)"]),
                              start_new_session=True)
print(grandchild.pid, flush=True)
time.sleep(600)
'''
env = {**os.environ, lifeline.PARENT_PID_ENV: str(os.getpid())}
child = subprocess.Popen(lifeline.wrap([sys.executable, "-c", child_code]), env=env, stdout=subprocess.PIPE, text=True)
print(child.pid, child.stdout.readline().strip(), flush=True)
child.wait()
"""


def _gone(pids: list[int], timeout: float) -> list[int]:
    """The pids still alive (zombies count as gone) after ``timeout`` seconds."""
    deadline = time.time() + timeout
    alive = pids
    while alive and time.time() < deadline:
        alive = [p for p in alive if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.05)
    return alive


def test_children_and_grandchildren_die_with_a_sigkilled_parent():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child, grandchild = map(int, parent.stdout.readline().split())
        assert psutil.Process(child).ppid() == parent.pid and psutil.Process(grandchild).ppid() == child
        # After its exec the lifeline process is the command itself: same pid, the command's own cmdline.
        assert "time.sleep(600)" in " ".join(psutil.Process(grandchild).cmdline())
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert _gone([child, grandchild], timeout=10) == []
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_child_whose_parent_already_died_does_not_start(tmp_path):
    """The parent died between fork and prctl: the child was reparented, no signal will come; it must exit."""
    marker = tmp_path / "started"
    env = {**os.environ, lifeline.PARENT_PID_ENV: "1"}  # not our parent: as if the real one had died already
    command = lifeline.wrap([sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"])
    assert subprocess.run(command, env=env, timeout=60).returncode == 1
    assert not marker.exists()


def test_unless_exists_stops_before_starting_and_says_why(tmp_path):
    stop = tmp_path / "fatal_error.txt"
    stop.write_text("rank 0: TrainingDiverged: loss=nan")
    command = lifeline.wrap([sys.executable, "-c", "print('started')"], unless_exists=stop)
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "started" not in proc.stdout
    assert f"Not started: {stop} exists" in proc.stderr and "loss=nan" in proc.stderr
    stop.unlink()
    assert subprocess.run(command, capture_output=True, text=True, timeout=60).stdout == "started\n"


def test_the_launch_command_puts_the_agent_behind_a_lifeline_and_names_the_fatal_marker(tmp_path):
    """The agent starts through the lifeline; it forks the workers, which check the marker and arm their own
    lifeline in-process (cluster/agent.py:worker, exercised by the DDP and fault tests)."""
    from torchtfx.components.torch_trainer.cluster.launch import agent_command
    from torchtfx.components.torch_trainer.handoff.constants import AGENT_MODULE, FATAL_FILE
    from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
    from torchtfx.components.torch_trainer.handoff.job import TrainJob
    from torchtfx.components.torch_trainer.modeling.features import FeatureLayout

    job = TrainJob(
        str(tmp_path / "data"),
        str(tmp_path / "model"),
        str(tmp_path / "run"),
        FeatureLayout(("a",), (), (), "y"),
        TrainerHParams(num_workers=2),
        "",
        "e",
        "r",
        {},
    )
    command = agent_command(tmp_path / "job.json", job)
    marker = str(tmp_path / "run" / FATAL_FILE)
    assert command == [
        sys.executable,
        "-m",
        lifeline.MODULE,
        sys.executable,
        "-u",
        "-m",
        AGENT_MODULE,
        "--nproc-per-node=2",
        f"--max-restarts={TrainerHParams().max_restarts}",
        "--fatal-marker",
        marker,
        "--job",
        str(tmp_path / "job.json"),
    ]
