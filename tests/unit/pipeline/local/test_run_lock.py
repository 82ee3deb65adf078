"""One run at a time on a pipeline root: a real second ``torchtfx run`` process against a root whose lock a
helper process holds (no pipeline is run: the refusal comes before any stage)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchtfx.pipeline.cli.errors import BUSY_EXIT_CODE
from torchtfx.pipeline.local.run_lock import LOCK_FILE, RootBusyError, run_lock

TORCHTFX = Path(sys.executable).parent / "torchtfx"
HOLDER = """
import sys, time
from pathlib import Path
from torchtfx.pipeline.local.run_lock import run_lock
with run_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.fixture()
def holder(tmp_path):
    """Another process holding ``tmp_path / "root"``'s run lock, as a running ``torchtfx run`` does."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "root")], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _sample(taxi_csv: Path, directory: Path, lines: int = 200) -> Path:
    directory.mkdir()
    with taxi_csv.open() as src:
        (directory / "data.csv").write_text("".join(next(src) for _ in range(lines)))
    return directory


def test_a_second_run_on_a_held_root_is_refused_at_once_naming_the_holder(tmp_path, holder, taxi_csv):
    """Two runs on one root printed each other's summary and raced to migrate the MLflow store."""
    root, data = tmp_path / "root", _sample(taxi_csv, tmp_path / "data")
    started = time.monotonic()
    command = [str(TORCHTFX), "run", "--pipeline-root", str(root), "--data-dir", str(data)]
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = run.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        out, _ = run.communicate()
        pytest.fail(f"a run on a held root was not refused; it ran on:\n{out[-2000:]}")
    seconds = time.monotonic() - started
    assert run.returncode == BUSY_EXIT_CODE, out
    assert f"another torchtfx run holds the pipeline root {root}" in out
    assert f"pid {holder.pid}, started 20" in out and f"command: {sys.executable} -c" in out
    assert "--pipeline-root" in out and "Traceback" not in out
    assert not (root / "metadata.sqlite").exists() and not (root / "mlflow").exists()  # nothing was started
    assert seconds < 90, f"refused after {seconds:.0f} s"  # the CLI's imports; no stage ran


def test_a_killed_holder_releases_the_root(tmp_path, holder):
    root = tmp_path / "root"
    with pytest.raises(RootBusyError, match=f"pid {holder.pid}"):
        with run_lock(root):
            pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with run_lock(root):  # the kernel released the dead holder's flock; its record is replaced
        assert f"pid {os.getpid()}," in (root / LOCK_FILE).read_text()
    assert (root / LOCK_FILE).read_text() == ""
