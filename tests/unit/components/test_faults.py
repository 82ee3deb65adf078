"""Faults and concurrency, with real processes, files and registries: two promotions at once, a disk that
fills during the push, a DDP worker killed mid-epoch, a checkpoint write that dies half-way."""

from __future__ import annotations

import ast
import contextlib
import errno
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import torch
from mlflow.tracking import MlflowClient

from tests import helpers
from tests.fakes.model_server import FakeModelServer
from tests.paths import PROJECT_ROOT
from tests.unit.components.promoter.test_promotion import _digest, _saved_model
from torchtfx.components.promoter import promotion
from torchtfx.components.shared import contracts
from torchtfx.components.shared.mlflow_client import CHAMPION, PREVIOUS, Registry
from torchtfx.components.tf_serving import layout, model_config
from torchtfx.components.tf_serving.model_config import ServedState
from torchtfx.components.torch_trainer.cluster.launch import launch
from torchtfx.components.torch_trainer.handoff.constants import AGENT_MODULE, FATAL_FILE
from torchtfx.components.torch_trainer.handoff.job import TrainResult
from torchtfx.components.torch_trainer.worker.checkpoint import save_atomic


def _world(tmp_path: Path):
    registry = Registry(f"sqlite:///{tmp_path / 'mlflow.db'}", "torchtfx-test")
    experiment = registry.client.create_experiment("runs", artifact_location=str(tmp_path / "artifacts"))
    return promotion.ServingTarget(tmp_path / "serving", "test", registry), experiment


def _promote_in_process(db: str, serving: str, model: str, run_id: str, barrier, address: str) -> None:
    target = promotion.ServingTarget(Path(serving), "test", Registry(db, "torchtfx-test"), server_address=address)
    barrier.wait()  # both processes enter promote() together
    promotion.promote(promotion.Candidate(Path(model), None, run_id, {"model": model}), target)


def test_concurrency_two_promotions_at_once_stay_consistent(tmp_path):
    """Two real processes promote into the same serving directory and registry at the same moment."""
    target, experiment = _world(tmp_path)
    target.serving_dir.mkdir()
    models = [_saved_model(tmp_path / f"model-{i}", float(i)) for i in range(2)]
    runs = [target.registry.client.create_run(experiment).info.run_id for _ in models]
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    db = f"sqlite:///{tmp_path / 'mlflow.db'}"
    # Each confirms its load with TF Serving (the ModelService TEST DOUBLE): without a server address the second
    # would refuse to start while the first one's label move waits for `promote --finish`.
    server = FakeModelServer(load_seconds=0.05).start()
    procs = [
        context.Process(
            target=_promote_in_process, args=(db, str(target.serving_dir), str(m), r, barrier, server.address)
        )
        for m, r in zip(models, runs, strict=True)
    ]
    try:
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(timeout=300)
    finally:
        server.stop()
    assert [p.exitcode for p in procs] == [0, 0]
    assert layout.versions(target.serving_dir) == [1, 2]  # unique, increasing
    champion, previous = target.registry.alias_version(CHAMPION), target.registry.alias_version(PREVIOUS)
    assert target.registry.serving_version(CHAMPION) == 2 and target.registry.serving_version(PREVIOUS) == 1
    assert champion.version != previous.version
    assert model_config.read_state(target.serving_dir) == ServedState(frozenset({1, 2}), {"stable": 2, "canary": 2})
    assert promotion.pending_label_move(target) is None
    assert not (target.serving_dir / promotion.JOURNAL_FILE).exists()


def test_fault_disk_full_during_push_leaves_no_partial_version(tmp_path, monkeypatch):
    """The copy into the serving directory fails half-way with ENOSPC (simulated at the copy call)."""
    target, experiment = _world(tmp_path)
    first = promotion.Candidate(
        _saved_model(tmp_path / "m1", 1.0), None, target.registry.client.create_run(experiment).info.run_id, {}
    )
    promotion.promote(first, target)
    promotion.finish(target)  # the label move a server-less promotion leaves pending
    before = _digest(target.serving_dir)
    real_copytree = shutil.copytree
    copied = []

    def copy_until_full(src, dst, *args, **kwargs):
        copied.append(dst)
        if len(copied) > 1:
            raise OSError(errno.ENOSPC, "No space left on device", dst)
        return shutil.copy2(src, dst)

    class FullDisk:  # layout's view of shutil: copytree fails on the second file
        def __getattr__(self, name):
            return getattr(shutil, name)

        def copytree(self, src, dst):
            return real_copytree(src, dst, copy_function=copy_until_full)

    monkeypatch.setattr(layout, "shutil", FullDisk())
    second = promotion.Candidate(
        _saved_model(tmp_path / "m2", 2.0), None, target.registry.client.create_run(experiment).info.run_id, {}
    )
    with pytest.raises(promotion.PromotionError) as err:
        promotion.promote(second, target)
    assert str(err.value) == (
        f"pushing serving version 2 to {target.serving_dir} failed (No space left on device); nothing was promoted "
        "and the partial copy was removed. Free space (or fix permissions) and rerun."
    )
    after = {k: v for k, v in _digest(target.serving_dir).items() if k != layout.VERSION_COUNTER}
    assert after == {k: v for k, v in before.items() if k != layout.VERSION_COUNTER}
    assert [p.name for p in target.serving_dir.iterdir() if p.name.startswith(layout.TMP_PREFIX)] == []
    assert target.registry.serving_version(CHAMPION) == 1
    monkeypatch.undo()
    assert promotion.promote(second, target) == 3  # the failed number is never reused


def test_fault_checkpoint_write_dying_half_way_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    save_atomic({"epoch": 1}, path)

    def torn_save(obj, file):
        file.write(b"PK\x03\x04 half a zip")  # the process "dies" mid-write
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", torn_save)
    with pytest.raises(KeyboardInterrupt):
        save_atomic({"epoch": 2}, path)
    assert torch.load(path, weights_only=True) == {"epoch": 1}  # never the torn bytes


def _kill_a_worker_at_epoch(log: Path, epoch: int, job_path: Path, killed: list[int]) -> None:
    """Wait for rank 0 to finish ``epoch``, then SIGKILL a worker process (not the agent)."""
    deadline = time.time() + 300
    while time.time() < deadline and not (log.exists() and f"epoch {epoch}/" in log.read_text()):
        time.sleep(0.05)
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if AGENT_MODULE in cmd and str(job_path) in cmd and helpers.is_ddp_worker(proc):
            proc.kill()
            killed.append(proc.pid)
            return


def test_fault_ddp_worker_sigkilled_mid_training_resumes_from_checkpoint(tmp_path, tiny_taxi):
    """Real elastic agent, 2 forked gloo workers, the default restart budget; one worker is SIGKILLed early in
    epoch 3. The agent restarts both; they resume from rank 0's last checkpoint, continue the same MLflow run at
    the next step, and end where an uninterrupted run ends."""
    # ~1-2 s per epoch (train rows tiled), so the kill lands mid-training, not after it. No max_restarts: the
    # default must survive a worker's death.
    hparams = {"epochs": 5, "early_stopping_patience": 10, "batch_size": 256, "repeat_train": 150}
    clean = helpers.tiny_train_job(tmp_path / "clean", tiny_taxi, **hparams)
    launch(clean, tmp_path / "clean" / "job.json", tmp_path / "clean" / "train.log")
    faulty = helpers.tiny_train_job(tmp_path / "faulty", tiny_taxi, **hparams)
    log, job_path, killed = tmp_path / "faulty" / "train.log", tmp_path / "faulty" / "job.json", []
    killer = threading.Thread(target=_kill_a_worker_at_epoch, args=(log, 2, job_path, killed))
    killer.start()
    launch(faulty, job_path, log)
    killer.join()
    assert killed, "no worker was killed"
    text = log.read_text()
    # The kill lands after epoch 2 was reported, before or after its checkpoint: the restart resumes at
    # epoch 2 or 3, never from scratch, and epoch 1 is trained once.
    resumed = re.findall(r"Resumed from .* at epoch (\d+)", text)
    assert resumed and all(int(epoch) in (2, 3) for epoch in resumed), resumed
    assert text.count("epoch 1/5") == 1
    expected = TrainResult.load(Path(clean.run_dir) / contracts.RESULT_FILE).eval_auc
    result = TrainResult.load(Path(faulty.run_dir) / contracts.RESULT_FILE)
    assert abs(result.eval_auc - expected) <= 0.005, (result.eval_auc, expected)
    assert result.epochs_run == 5 and not (Path(faulty.run_dir) / FATAL_FILE).exists()
    # One MLflow run, every epoch logged once at its own step (the restarted rank 0 reopened the run).
    client = MlflowClient(faulty.mlflow_tracking_uri)
    (run,) = client.search_runs([client.get_experiment_by_name(faulty.mlflow_experiment).experiment_id])
    assert run.info.run_id == result.mlflow_run_id
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "eval_loss")) == [1, 2, 3, 4, 5]


LAUNCHER = """
import sys
from pathlib import Path
from torchtfx.components.torch_trainer.cluster.launch import launch
from torchtfx.components.torch_trainer.handoff.job import TrainJob
launch(TrainJob.load(Path(sys.argv[1])), Path(sys.argv[1]), Path(sys.argv[2]))
"""


def test_fault_the_agent_and_workers_die_with_a_sigkilled_launcher(tmp_path, tiny_taxi):
    """The process that runs launch() (the pipeline, in a real run) is SIGKILLed alone, as the OOM killer does,
    while its workers train: the agent and both workers must die with it, not run on under init."""
    job = helpers.tiny_train_job(tmp_path, tiny_taxi, epochs=50, early_stopping_patience=50, repeat_train=150)
    job_path, log = tmp_path / "job.json", tmp_path / "train.log"
    job.save(job_path)
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(job_path), str(log)])
    descendants: list[psutil.Process] = []
    try:
        deadline = time.time() + 300
        while not (log.exists() and "epoch 1/" in log.read_text()):
            assert launcher.poll() is None and time.time() < deadline, log.read_text() if log.exists() else ""
            time.sleep(0.1)
        descendants = psutil.Process(launcher.pid).children(recursive=True)
        workers = [p for p in descendants if helpers.is_ddp_worker(p)]
        assert len(workers) == 2 and len(descendants) == 3, [p.cmdline() for p in descendants]
        launcher.kill()
        launcher.wait()
        _, alive = psutil.wait_procs(descendants, timeout=20)
        assert alive == [], [(p.pid, p.cmdline()) for p in alive]
    finally:
        launcher.kill()
        for proc in descendants:  # only where the test failed
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()


def test_security_torch_load_is_weights_only_everywhere():
    """Every torch.load in the project passes weights_only=True (no pickle code execution)."""
    offenders = []
    for path in [
        *PROJECT_ROOT.glob("components/**/*.py"),
        *PROJECT_ROOT.glob("pipeline/**/*.py"),
        *PROJECT_ROOT.glob("data/**/*.py"),
        *PROJECT_ROOT.glob("tests/**/*.py"),
    ]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "load":
                if getattr(node.func.value, "id", "") == "torch":
                    safe = any(
                        k.arg == "weights_only" and getattr(k.value, "value", None) is True for k in node.keywords
                    )
                    offenders += [] if safe else [f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}"]
    assert offenders == []


def _cli_world(tmp_path: Path):
    """A serving directory and registry where `torchtfx promote` (the CLI's own settings) finds them."""
    from torchtfx.pipeline.cli.promotion import local_settings, serving_target
    from torchtfx.pipeline.settings.declared import DEFAULT_DATASET

    root, serving = tmp_path / "pipeline", tmp_path / "serving"
    settings = local_settings(DEFAULT_DATASET, root, serving)
    settings.root.joinpath("mlflow").mkdir(parents=True)
    target = serving_target(settings)
    experiment = target.registry.client.create_experiment("runs", artifact_location=str(tmp_path / "artifacts"))

    def candidate(value: float) -> promotion.Candidate:
        run_id = target.registry.client.create_run(experiment).info.run_id
        return promotion.Candidate(_saved_model(tmp_path / f"model-{value}", value), None, run_id, {})

    cli = [
        sys.executable,
        "-m",
        "torchtfx.pipeline.cli.main",
        "promote",
        "--pipeline-root",
        str(root),
        "--serving-dir",
        str(serving),
    ]
    return target, candidate, cli


def _cli_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}


def _state(target: promotion.ServingTarget):
    """Serving folder, labels, journal and registry aliases: what must agree after every command."""
    previous = target.registry.serving_version(PREVIOUS)
    return (
        layout.versions(target.serving_dir),
        model_config.read_state(target.serving_dir),
        promotion.pending_label_move(target),
        target.registry.serving_version(CHAMPION),
        previous,
    )


def test_fault_rollback_twice_with_two_versions_goes_to_1_then_refuses_and_changes_nothing(tmp_path):
    """`torchtfx promote --rollback` twice (the real CLI) over versions 1 and 2: the first makes 1 the champion
    with both labels, the second is the no-op the Promoter's README documents, in one line, exit 0."""
    target, candidate, cli = _cli_world(tmp_path)
    for value in (1.0, 2.0):
        promotion.promote(candidate(value), target)
        promotion.finish(target)  # confirm the load a server-less promotion leaves pending
    assert _state(target) == ([1, 2], ServedState(frozenset({1, 2}), {"stable": 2, "canary": 2}), None, 2, 1)
    first = subprocess.run([*cli, "--rollback"], capture_output=True, text=True, timeout=300, env=_cli_env())
    assert first.returncode == 0, first.stderr[-3000:]
    registry_one = target.registry.alias_version(CHAMPION).version
    assert first.stdout.startswith(f"rolled back: champion is registry version {registry_one} again (was "), first
    after_first = _state(target)
    assert after_first[1].labels == {"stable": 1, "canary": 1} and after_first[2:] == (None, 1, None), after_first
    digest = _digest(target.serving_dir)
    second = subprocess.run([*cli, "--rollback"], capture_output=True, text=True, timeout=300, env=_cli_env())
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout.splitlines() == [
        f"nothing to roll back: {target.model_name} has no previous champion (champion stays registry version "
        f"{registry_one})"
    ], second
    assert _state(target) == after_first and _digest(target.serving_dir) == digest
    assert not (target.serving_dir / promotion.JOURNAL_FILE).exists()


def _promote_stopping_in_the_lock(root: str, serving: str, model: str, run_id: str) -> None:
    """A Promoter's promotion (the real code and settings of the CLI's target) that stops itself with SIGSTOP
    inside the promotion lock, after journaling the push, until the test sends SIGCONT."""
    from torchtfx.pipeline.cli.promotion import local_settings, serving_target
    from torchtfx.pipeline.settings.declared import DEFAULT_DATASET

    target = serving_target(local_settings(DEFAULT_DATASET, Path(root), Path(serving)))
    real_push = layout.push_version

    def stop_then_push(*args):
        os.kill(os.getpid(), signal.SIGSTOP)
        return real_push(*args)

    layout.push_version = stop_then_push
    promotion.promote(promotion.Candidate(Path(model), None, run_id, {}), target)


def _stopped(pid: int) -> bool:
    return psutil.Process(pid).status() == psutil.STATUS_STOPPED


def test_fault_promote_finish_while_a_promotion_holds_the_lock_waits_and_confirms_nothing_unseen(tmp_path):
    """`torchtfx promote --finish` (the real CLI) while a promotion of version 2 is stopped inside the promotion
    lock: the finish waits for the lock, saying so; the promotion completes; the finish, typed before version 2
    existed, does not confirm version 2's load; serving folder, journal and registry agree; a second --finish
    then confirms it."""
    target, candidate, cli = _cli_world(tmp_path)
    promotion.promote(candidate(1.0), target)
    promotion.finish(target)
    second = candidate(2.0)
    context = multiprocessing.get_context("spawn")
    root = str(tmp_path / "pipeline")
    args = (root, str(target.serving_dir), str(second.saved_model_dir), second.mlflow_run_id)
    promoter = context.Process(target=_promote_stopping_in_the_lock, args=args)
    promoter.start()
    finishing = None
    try:
        deadline = time.time() + 300
        while not _stopped(promoter.pid):
            assert promoter.is_alive() and time.time() < deadline, promoter.exitcode
            time.sleep(0.1)
        finishing = subprocess.Popen(
            [*cli, "--finish"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_cli_env()
        )
        waiting = finishing.stderr.readline()  # it says so once it blocks on the lock (before: its startup lines)
        while "Waiting for another promotion on" not in waiting:
            assert waiting, finishing.communicate()  # stderr closed: it ended without waiting
            waiting = finishing.stderr.readline()
        time.sleep(0.5)
        assert finishing.poll() is None, finishing.communicate()
        os.kill(promoter.pid, signal.SIGCONT)
        promoter.join(timeout=300)
        out, err = finishing.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(promoter.pid, signal.SIGKILL)  # only where the test failed
        if finishing is not None and finishing.poll() is None:
            finishing.kill()
    assert promoter.exitcode == 0
    assert finishing.returncode == 1 and err.strip().splitlines()[-1].endswith(
        "serving version 2 was staged by a promotion that ran after this `promote --finish` started, so it cannot "
        "confirm that TF Serving loaded it; nothing was changed. Check that TF Serving reports version 2 AVAILABLE "
        "and run `torchtfx promote --finish` again (or `--rollback` if it failed to load)"
    ), (out, err)
    staged = ServedState(frozenset({1, 2}), {"stable": 1, "canary": 1})
    assert _state(target) == ([1, 2], staged, 2, 2, 1)  # the promotion's own state: labels wait for a confirmation
    again = subprocess.run([*cli, "--finish"], capture_output=True, text=True, timeout=300, env=_cli_env())
    assert again.returncode == 0, again.stderr[-3000:]
    assert _state(target) == ([1, 2], ServedState(frozenset({1, 2}), {"stable": 2, "canary": 2}), None, 2, 1)
    assert not (target.serving_dir / promotion.JOURNAL_FILE).exists()
