"""`torchtfx promote` refuses before it creates anything or takes the promotion lock: arguments that name no
registry version, a registry that does not exist, and an MLflow server that does not answer (real HTTP to a
closed port on 127.0.0.1, a real sqlite registry, the real lock)."""

from __future__ import annotations

import fcntl
import socket
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchtfx.components.shared.mlflow_client import client
from torchtfx.components.tf_serving.layout import LOCK_FILE
from torchtfx.pipeline.cli.main import cli


def _promote(root: Path, *args: str):
    return CliRunner().invoke(cli, ["promote", "--pipeline-root", str(root), *args])


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.fixture
def closed_port_uri() -> str:
    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--version", "-3", "--reason", "hotfix"), "--version -3 is not a registry version: they count from 1"),
        (("--version", "-3"), "--version -3 is not a registry version: they count from 1"),
        (("--version", "3", "--reason", "hotfix"), "the promotion of registry version 3 has nothing to act on"),
        (("--rollback",), "the rollback has nothing to act on"),
        (("--finish",), "promote --finish has nothing to act on"),
    ],
)
def test_a_refused_promote_on_an_empty_root_is_one_line_and_leaves_the_root_empty(tmp_path, args, message):
    """Before: `--version -3 --reason hotfix` created mlflow/mlflow.db and bound serving/taxi (its
    .torchtfx-registry.json and lock file) before saying that version -3 did not exist."""
    root = tmp_path / "root"
    root.mkdir()
    result = _promote(root, *args)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], result.output
    assert "nothing was created or changed" in lines[0]
    assert _listing(root) == []


def test_an_unknown_version_is_refused_before_the_serving_directory_is_bound(tmp_path):
    root = tmp_path / "root"
    (root / "mlflow").mkdir(parents=True)
    client(f"sqlite:///{root / 'mlflow' / 'mlflow.db'}").search_registered_models()  # an empty registry
    before = _listing(root)
    result = _promote(root, "--version", "9", "--reason", "hotfix")
    assert result.exit_code == 1
    assert result.output.strip() == "Error: torchtfx-taxi has no registry version 9; it has []"
    assert _listing(root) == before  # no serving/taxi, no binding, no lock file


def test_rollback_against_an_unreachable_mlflow_fails_in_seconds_without_taking_the_lock(
    tmp_path, monkeypatch, closed_port_uri
):
    """Before: MLflow's client retried for more than 150 s while the rollback held the promotion lock."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", closed_port_uri)
    serving = tmp_path / "root" / "serving" / "taxi"
    serving.mkdir(parents=True)
    (serving / LOCK_FILE).touch()
    outcome: dict = {}

    def run() -> None:
        outcome["result"] = _promote(tmp_path / "root", "--rollback")

    start = time.monotonic()
    command = threading.Thread(target=run, daemon=True)
    command.start()
    free = 0
    with open(serving / LOCK_FILE, "a+") as lock:
        while command.is_alive() and time.monotonic() - start < 20:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises BlockingIOError while the command holds it
            fcntl.flock(lock, fcntl.LOCK_UN)
            free += 1
            time.sleep(0.05)
    command.join(timeout=1)
    elapsed = time.monotonic() - start
    assert not command.is_alive() and elapsed < 10, f"still running after {elapsed:.0f} s"
    assert free > 0
    result = outcome["result"]
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"Error: the MLflow tracking server at {closed_port_uri} is unreachable")
    assert "the promotion lock was not taken" in lines[0]
    assert "Start the MLflow server, or set MLFLOW_TRACKING_URI" in lines[0]
    assert _listing(serving) == [LOCK_FILE]  # nothing bound, nothing journaled
