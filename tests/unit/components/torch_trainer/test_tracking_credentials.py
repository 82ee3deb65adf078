"""A password inside MLFLOW_TRACKING_URI reaches MLflow and nothing else: not the job file on the (shared)
volume, not the training log, not the written outputs, not a log record, not an execution property.

The tracking server is MLflow's own (its Flask app, in a subprocess) behind HTTP basic auth, so a worker that
got a redacted URI instead of the real one would be refused and the run would fail."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import helpers
from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.cluster.launch import launch
from torchtfx.components.torch_trainer.handoff.job import TrainJob, TrainResult

USER, SECRET = "alice", "pw-7d1e3f-never-log-me"

_SERVER = """
import base64, os, sys
from werkzeug.serving import WSGIRequestHandler, make_server

os.environ["_MLFLOW_SERVER_FILE_STORE"] = sys.argv[1]
os.environ["_MLFLOW_SERVER_ARTIFACT_ROOT"] = sys.argv[2]
from mlflow.server import app

EXPECTED = "Basic " + base64.b64encode(sys.argv[3].encode()).decode()


def guarded(environ, start_response):
    if environ.get("HTTP_AUTHORIZATION") != EXPECTED:
        start_response("401 Unauthorized", [("Content-Type", "text/plain")])
        return [b"unauthorized"]
    return app(environ, start_response)


class Quiet(WSGIRequestHandler):
    def log_request(self, *args):
        pass


server = make_server("127.0.0.1", 0, guarded, threaded=True, request_handler=Quiet)
print(server.server_port, flush=True)
server.serve_forever()
"""


@pytest.fixture(scope="module")
def server_uri(tmp_path_factory):
    """``http://alice:<SECRET>@127.0.0.1:<port>``: a real MLflow tracking server that answers only that user."""
    root = tmp_path_factory.mktemp("mlflow_server")
    args = [f"sqlite:///{root / 'server.db'}", str(root / "artifacts"), f"{USER}:{SECRET}"]
    server = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_SERVER), *args], stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(server.stdout.readline())
        yield f"http://{USER}:{SECRET}@127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def _leaks(root: Path) -> list[str]:
    """Every file under ``root`` that holds the password or a credential-looking value."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        text = path.read_bytes().decode(errors="ignore")
        if SECRET in text or helpers.find_credentials(text):
            found.append(str(path.relative_to(root)))
    return found


def test_a_password_in_the_tracking_uri_reaches_mlflow_and_no_file_or_log(
    tmp_path, tiny_taxi, server_uri, monkeypatch, caplog
):
    """Two real DDP workers (torchrun): the job file, the training log, the outputs and this process's log
    records are scanned; the run is recorded by the server, so the workers used the real URI."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server_uri)  # where the executor found it: torchrun inherits it
    job = helpers.tiny_train_job(tmp_path, tiny_taxi, epochs=1)
    job = TrainJob(**{**vars(job), "mlflow_tracking_uri": server_uri})  # as the executor resolved it
    with caplog.at_level(logging.DEBUG):
        launch(job, tmp_path / "job.json", tmp_path / "train.log")
    result = TrainResult.load(tmp_path / "run" / contracts.RESULT_FILE)

    from mlflow.tracking import MlflowClient

    assert MlflowClient(server_uri).get_run(result.mlflow_run_id).data.params["epochs"] == "1"
    assert "MLflow run" in (tmp_path / "train.log").read_text()  # the line that named the URI
    assert (tmp_path / "job.json").is_file() and _leaks(tmp_path) == []
    records = "\n".join(caplog.messages)
    assert SECRET not in records and helpers.find_credentials(records) == []


def test_the_local_pipeline_puts_no_credential_in_an_execution_property(
    tmp_path, taxi_cfg, server_uri, monkeypatch, caplog
):
    """``torchtfx run``'s pipeline, built with the password in the environment, up to the LocalDagRunner."""
    from tfx.orchestration.local import local_dag_runner

    from torchtfx.pipeline.local.runner import LocalSettings, run_local

    built = []

    class Stop(Exception):
        pass

    def capture(_runner, pipeline):
        built.append(pipeline)
        raise Stop

    monkeypatch.setenv("MLFLOW_TRACKING_URI", server_uri)
    monkeypatch.setattr(local_dag_runner.LocalDagRunner, "run", capture)
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "data.csv").write_text("a\n1\n")
    settings = LocalSettings(dataset=taxi_cfg, pipeline_root=tmp_path / "root", data_dir=tmp_path / "csv")
    with caplog.at_level(logging.DEBUG), pytest.raises(Stop):
        run_local(settings)  # the reachability check went to the server, with the credentials
    properties = repr([(c.id, c.exec_properties) for c in built[0].components])
    assert contracts.TRAINER_ID in properties and settings.mlflow_default_uri in properties
    assert SECRET not in properties and helpers.find_credentials(properties) == []
    records = "\n".join(caplog.messages)
    assert SECRET not in records and helpers.find_credentials(records) == []
    assert _leaks(tmp_path) == []
