"""Long fault tests (`make test-faults`): the real pipeline through the CLI, killed or cut off from MLflow.

Real: LocalDagRunner, Beam, sqlite MLMD and MLflow stores, torchrun; the kill is a SIGKILL to the whole
process group of `torchtfx run`; the unreachable server is a bound port on 127.0.0.1 with nothing listening.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

BEFORE_TRAINER = {"CsvExampleGen", "StatisticsGen", "ImportSchemaGen", "ExampleValidator", "Transform"}


def _run_args(data: Path, root: Path) -> list[str]:
    return [sys.executable, "-m", "torchtfx.pipeline.cli.main", "run", "--data-dir", str(data), "--pipeline-root",
            str(root / "pipeline"), "--serving-dir", str(root / "serving"), "--epochs", "4"]  # fmt: skip


@pytest.fixture(scope="module")
def sample(tmp_path_factory, taxi_csv) -> Path:
    rows = helpers.csv_rows(taxi_csv, 2000)
    return helpers.write_sample(rows, tmp_path_factory.mktemp("faults") / "data", list(rows[0]))


def test_fault_pipeline_killed_during_the_trainer_resumes_from_the_cache(sample, tmp_path):
    """SIGKILL `torchtfx run` (and its torchrun workers) while the Trainer runs; the same command again
    reuses every completed component through MLMD caching and finishes."""
    log = (tmp_path / "first.log").open("w")
    first = subprocess.Popen(_run_args(sample, tmp_path), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 900
    while "Component TorchTrainer is running" not in (tmp_path / "first.log").read_text():
        assert first.poll() is None and time.time() < deadline, (tmp_path / "first.log").read_text()[-3000:]
        time.sleep(0.5)
    time.sleep(3)  # into training
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    second = subprocess.run(_run_args(sample, tmp_path), capture_output=True, text=True, timeout=1200)
    assert second.returncode == 0, second.stderr[-3000:]
    stages = {s.node: s.state for s in helpers.metadata(tmp_path / "pipeline").stages}
    assert all(stages[node] == "CACHED" for node in BEFORE_TRAINER), stages
    assert stages["TorchTrainer"] == "COMPLETE" and stages["Promoter"] == "COMPLETE", stages
    assert (tmp_path / "serving" / "1" / "saved_model.pb").is_file()


def test_fault_mlflow_unreachable_with_continue_trains_untracked_and_never_promotes(sample, tmp_path):
    """Policy `continue`: training runs without tracking, loudly; the Promoter then refuses to promote (the
    registry records every promotion), so the serving directory stays byte-identical."""
    serving = tmp_path / "serving"
    serving.mkdir()
    before = helpers.tree_digest(serving)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{closed.getsockname()[1]}"
        proc = subprocess.run([*_run_args(sample, tmp_path), "--mlflow-unreachable", "continue"], capture_output=True,
                              text=True, timeout=1200, env={**os.environ, "MLFLOW_TRACKING_URI": uri})  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "continues WITHOUT MLflow tracking (policy 'continue')" in proc.stderr
    assert f"the MLflow tracking server at {uri} is unreachable" in proc.stderr
    assert "NOT promoted or recorded; the serving directory and the registry are unchanged" in proc.stderr
    stages = {s.node: s.state for s in helpers.metadata(tmp_path / "pipeline").stages}
    assert stages["TorchTrainer"] == "COMPLETE" and stages["Evaluator"] == "COMPLETE", stages
    assert helpers.tree_digest(serving) == before
