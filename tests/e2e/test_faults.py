"""Long fault tests (`make test-faults`): the real pipeline through the CLI, killed, cut off from MLflow, or
losing a DDP worker, always with the default settings.

Real: LocalDagRunner, Beam, sqlite MLMD and MLflow stores, torchrun; a kill is a real SIGKILL (of the whole
process group of `torchtfx run`, or of one DDP worker) or a SIGTERM of `torchtfx run` alone, as `kill PID` sends
it; the unreachable server is a bound port on 127.0.0.1 with nothing listening.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests import helpers
from torchtfx.components.torch_trainer.handoff.constants import AGENT_MODULE
from torchtfx.data import synthetic_taxi

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

BEFORE_TRAINER = {"CsvExampleGen", "StatisticsGen", "ImportSchemaGen", "ExampleValidator", "Transform"}


def _run_args(data: Path, root: Path, *extra: str) -> list[str]:
    # -v: these tests wait for the workers' per-epoch lines and read their resume lines, which a default run
    # leaves out of the console (pipeline/cli/console.py)
    return [
        sys.executable,
        "-m",
        "torchtfx.pipeline.cli.main",
        "-v",
        "run",
        "--data-dir",
        str(data),
        "--pipeline-root",
        str(root / "pipeline"),
        "--serving-dir",
        str(root / "serving"),
        *extra,
    ]


@pytest.fixture(scope="module")
def sample(tmp_path_factory, taxi_csv) -> Path:
    rows = helpers.csv_rows(taxi_csv, 2000)
    return helpers.write_sample(rows, tmp_path_factory.mktemp("faults") / "data", list(rows[0]))


def _training_processes(root: Path) -> list[psutil.Process]:
    """This test's DDP agent and the workers it forked (their command lines are the agent's: they name the job
    file under ``root``)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if str(root) in cmd and AGENT_MODULE in cmd:
            found.append(proc)
    return found


def _workers(root: Path) -> list[psutil.Process]:
    """The workers the agent forked (it names them: cluster/agent.py)."""
    return [proc for proc in _training_processes(root) if helpers.is_ddp_worker(proc)]


def _wait_for(condition, what: str, log: Path, proc: subprocess.Popen, timeout: float = 900) -> None:
    deadline = time.time() + timeout
    while not condition():
        assert proc.poll() is None and time.time() < deadline, f"{what}: " + log.read_text()[-3000:]
        time.sleep(0.2)


def _interrupt_transform(args: list[str], tmp_path: Path) -> None:
    """Run 1: SIGTERM `torchtfx run` alone (as `kill PID` does) while its Beam workers run Transform: exit 143
    with the line naming the stage; every process it started ends with it."""
    log = tmp_path / "transform.log"
    with log.open("w") as out:
        run = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_for(
            lambda: "Component Transform is running." in log.read_text() and _beam_workers(run.pid),
            "Transform's Beam workers",
            log,
            run,
        )
        started = psutil.Process(run.pid).children(recursive=True)
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=60) == 143, log.read_text()[-3000:]
        _, alive = psutil.wait_procs(started, timeout=30)
        assert alive == [], [" ".join(p.cmdline()) for p in alive]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)  # only where the test failed
    assert "torchtfx run interrupted by SIGTERM while Transform was running" in log.read_text(), log.read_text()[-3000:]


def _beam_workers(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.NoSuchProcess):
        return [p for p in psutil.Process(pid).children(recursive=True) if "sdk_worker_main" in " ".join(p.cmdline())]
    return []


def _kill_during_ddp(args: list[str], tmp_path: Path) -> None:
    """Run 2: SIGKILL `torchtfx run` (its process group: the agent and the workers run in sessions of their own)
    while the DDP workers train: no worker or agent outlives it. Run 1's completed stages came from the cache."""
    log = tmp_path / "trainer.log"
    with log.open("w") as out:
        run = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    _wait_for(lambda: len(_workers(tmp_path)) == 2 and "epoch 1/" in log.read_text(), "workers training", log, run)
    training = _training_processes(tmp_path)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    _, alive = psutil.wait_procs(training, timeout=20)
    assert alive == [], [" ".join(p.cmdline()) for p in alive]
    stages = {s.node: s.state for s in helpers.metadata(tmp_path / "pipeline").stages}
    assert all(stages[node] == "CACHED" for node in BEFORE_TRAINER - {"Transform"}), stages
    assert stages["Transform"] == "COMPLETE", stages


def test_fault_pipeline_sigterm_in_transform_then_sigkill_in_ddp_leave_no_orphan_and_resume(sample, tmp_path):
    """One pipeline root, three runs of the same command: SIGTERM during Transform (Beam worker processes), then
    SIGKILL during DDP training (2 workers), then a run that reuses every completed stage and finishes."""
    # 2,000 rows would run Beam and training in the pipeline's own process (beam mode and num_workers auto): ask
    # for the Beam worker processes and the DDP workers whose orphaning this test is about.
    args = _run_args(
        sample,
        tmp_path,
        "--epochs",
        "4",
        "--num-workers",
        "2",
        "--beam-mode",
        "multi_processing",
        "--beam-workers",
        "2",
    )
    _interrupt_transform(args, tmp_path)
    _kill_during_ddp(args, tmp_path)
    third = subprocess.run(args, capture_output=True, text=True, timeout=1200)
    assert third.returncode == 0, third.stderr[-3000:]
    stages = {s.node: s.state for s in helpers.metadata(tmp_path / "pipeline").stages}
    assert all(stages[node] == "CACHED" for node in BEFORE_TRAINER), stages
    assert stages["TorchTrainer"] == "COMPLETE" and stages["Promoter"] == "COMPLETE", stages
    assert (tmp_path / "serving" / "1" / "saved_model.pb").is_file()


def test_fault_a_ddp_worker_killed_in_the_second_epoch_of_a_default_run_is_restarted(tmp_path):
    """A default `torchtfx run` (150,000 synthetic rows, batch size 16: epochs long enough to kill into): one
    DDP worker is SIGKILLed during epoch 2. torchrun restarts the workers, they resume from rank 0's checkpoint
    of epoch 1, and the run finishes gated and promoted, with one MLflow run whose epochs are each logged once."""
    data = tmp_path / "data"
    synthetic_taxi.write_csv(data, 150_000, seed=7)
    log = tmp_path / "run.log"
    with log.open("w") as out:
        run = subprocess.Popen(_run_args(data, tmp_path, "--batch-size", "16"), stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for(lambda: "epoch 1/" in log.read_text(), "epoch 1 reported", log, run, timeout=1500)
        # A third into epoch 2 (measured: about 9 s an epoch on 2 cores, 100,000 train rows at 10,800 rows/s).
        text = log.read_text()
        rows = int(re.search(r"Materialized (\d+) rows of split train", text).group(1))
        time.sleep(rows / float(re.search(r"epoch 1/.*\((\d+) examples/s\)", text).group(1)) / 3)
        victim = _workers(tmp_path)[-1]
        victim.kill()
        assert run.wait(timeout=2400) == 0, log.read_text()[-4000:]
    finally:
        if run.poll() is None:
            run.kill()
    text = log.read_text()
    assert re.findall(r"Resumed from \S+ at epoch (\d+)", text) == ["2"], text[-4000:]
    summary = helpers.metadata(tmp_path / "pipeline")
    assert all(s.state == "COMPLETE" for s in summary.stages), summary.stages
    assert summary.blessed is True and summary.pushed_to
    assert (tmp_path / "serving" / "1" / "saved_model.pb").is_file()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'pipeline' / 'mlflow' / 'mlflow.db'}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    (mlflow_run,) = client.search_runs(experiments)
    steps = sorted(m.step for m in client.get_metric_history(mlflow_run.info.run_id, "eval_loss"))
    assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 2, steps


def test_fault_mlflow_unreachable_with_continue_trains_untracked_and_never_promotes(sample, tmp_path):
    """Policy `continue`: training runs without tracking, loudly; the Promoter then refuses to promote (the
    registry records every promotion), so the serving directory stays byte-identical."""
    serving = tmp_path / "serving"
    serving.mkdir()
    before = helpers.tree_digest(serving)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{closed.getsockname()[1]}"
        proc = subprocess.run(
            [*_run_args(sample, tmp_path, "--epochs", "4"), "--mlflow-unreachable", "continue"],
            capture_output=True,
            text=True,
            timeout=1200,
            env={**os.environ, "MLFLOW_TRACKING_URI": uri},
        )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "continues WITHOUT MLflow tracking (policy 'continue')" in proc.stderr
    assert f"the MLflow tracking server at {uri} is unreachable" in proc.stderr
    assert "NOT promoted or recorded; the serving directory and the registry are unchanged" in proc.stderr
    stages = {s.node: s.state for s in helpers.metadata(tmp_path / "pipeline").stages}
    assert stages["TorchTrainer"] == "COMPLETE" and stages["Evaluator"] == "COMPLETE", stages
    assert helpers.tree_digest(serving) == before
