"""`torchtfx submit` against a fake Kubeflow Pipelines API server: no KFP API server can run on these
machines, so a real HTTP server in a thread answers the v2beta1 endpoints (healthz, experiments, runs) and
the real ``kfp.Client`` talks to it. Real: the package reading, the client's request bodies and auth header."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from tests import helpers
from tests.fakes.http_server import http_server
from torchtfx.data.config.dataset import PROJECT_ROOT
from torchtfx.pipeline.kfp.compile import compile_pipeline
from torchtfx.pipeline.kfp.config import load_kubeflow_settings
from torchtfx.pipeline.kfp.submit import SubmitError, submit


class FakeKfp:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.experiments: list[dict] = []
        self.run_code = 200

    def handle(self, method: str, url: str, body: bytes, headers: dict) -> tuple[int, dict]:
        parsed = urllib.parse.urlsplit(url)
        self.requests.append({"method": method, "path": parsed.path, "headers": headers,
                              "body": json.loads(body) if body else None})  # fmt: skip
        if parsed.path == "/apis/v2beta1/healthz":
            return 200, {"multi_user": False}
        if parsed.path == "/apis/v2beta1/experiments" and method == "GET":
            return 200, {"experiments": self.experiments, "total_size": len(self.experiments)}
        if parsed.path == "/apis/v2beta1/experiments" and method == "POST":
            experiment = {**json.loads(body), "experiment_id": f"exp-{len(self.experiments) + 1}"}
            self.experiments.append(experiment)
            return 200, experiment
        if parsed.path == "/apis/v2beta1/runs" and method == "POST":
            if self.run_code != 200:
                return self.run_code, {"error_message": "simulated refusal", "code": 7}
            return 200, {**json.loads(body), "run_id": "run-123", "state": "PENDING"}
        return 404, {"error_message": f"no route {method} {parsed.path}"}

    def runs(self) -> list[dict]:
        return [r for r in self.requests if r["path"] == "/apis/v2beta1/runs"]


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    return compile_pipeline(load_kubeflow_settings(PROJECT_ROOT / "kubeflow" / "pools.yaml"),
                            tmp_path_factory.mktemp("pkg") / "torchtfx-taxi.yaml")  # fmt: skip


@pytest.fixture
def kfp():
    state = FakeKfp()
    with http_server(state.handle) as url:
        state.url = url
        yield state


def test_submit_sends_spec_platform_spec_and_run_id_with_the_token_from_the_environment(kfp, package, monkeypatch):
    monkeypatch.setenv("KFP_TOKEN", "tok-from-env-0123456789")
    done = submit(package, host=kfp.url, experiment="taxi-nightly", run_name="nightly-1", params={})
    assert done.run_id == "run-123" and done.url.endswith("/#/runs/details/run-123")
    (run,) = kfp.runs()
    assert run["headers"]["authorization"] == "Bearer tok-from-env-0123456789"
    body = run["body"]
    assert body["display_name"] == "nightly-1" and body["experiment_id"] == "exp-1"
    assert body["pipeline_spec"]["pipeline_spec"]["schemaVersion"] == "2.1.0"
    assert "kubernetes" in body["pipeline_spec"]["platform_spec"]["platforms"]
    run_id = body["runtime_config"]["parameters"]["pipeline-run-id"]
    assert run_id.startswith("nightly-1-")
    assert "tok-from-env" not in json.dumps(body) and helpers.find_credentials(json.dumps(body)) == []


def test_submit_reuses_the_experiment(kfp, package):
    submit(package, host=kfp.url, experiment="taxi", run_name="a")
    submit(package, host=kfp.url, experiment="taxi", run_name="b")
    assert len(kfp.experiments) == 1 and len(kfp.runs()) == 2


def test_unknown_parameter_and_missing_package_are_refused(kfp, package, tmp_path):
    with pytest.raises(SubmitError, match=r"unknown pipeline parameters \['epochs'\]"):
        submit(package, host=kfp.url, experiment="taxi", params={"epochs": "3"})
    with pytest.raises(SubmitError, match="run `torchtfx compile` first"):
        submit(tmp_path / "missing.yaml", host=kfp.url, experiment="taxi")
    assert kfp.runs() == []


def test_refused_run_says_why(kfp, package):
    kfp.run_code = 403
    with pytest.raises(SubmitError, match=r"403.*KFP_TOKEN"):
        submit(package, host=kfp.url, experiment="taxi", run_name="x")
