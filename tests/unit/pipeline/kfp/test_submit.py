"""`torchtfx submit` against a fake Kubeflow Pipelines API server (tests/fakes/kfp_api.py): no KFP API server
can run on these machines, so a real HTTP server in a thread answers the v2beta1 endpoints (healthz,
experiments, runs) and the real ``kfp.Client`` talks to it. Real: the package reading, the client's request
bodies and auth header, and its deserialization of the run it polls."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from tests import helpers
from tests.fakes.http_server import http_server
from tests.fakes.kfp_api import FakeKfp, run_status
from tests.paths import PROJECT_ROOT
from tests.unit.pipeline.cli.test_setting_options import ALIAS_BOMB
from torchtfx.pipeline.kfp.compile import compile_pipeline
from torchtfx.pipeline.kfp.config import load_kubeflow_settings
from torchtfx.pipeline.kfp.follow import RunFollower, RunTimeoutError
from torchtfx.pipeline.kfp.package_info import recorded
from torchtfx.pipeline.kfp.submit import SubmitError, connect, submit

NS = "team-a"  # the profile namespace of a multi-user install


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    return compile_pipeline(
        load_kubeflow_settings(PROJECT_ROOT / "kubeflow" / "pools.yaml"),
        tmp_path_factory.mktemp("pkg") / "torchtfx-taxi.yaml",
    )


@pytest.fixture(scope="module")
def package_2_16(tmp_path_factory):
    """Compiled through the command line for backend 2.16 (its PlatformSpec has securityContext)."""
    from torchtfx.pipeline.cli.kubeflow import compile_cmd

    output = tmp_path_factory.mktemp("pkg216") / "torchtfx-taxi.yaml"
    config = PROJECT_ROOT / "kubeflow" / "pools.yaml"
    result = CliRunner().invoke(
        compile_cmd, ["--config", str(config), "--output", str(output), "--kfp-backend", "2.16"]
    )
    assert result.exit_code == 0, result.output
    return output


@pytest.fixture
def kfp():
    state = FakeKfp()
    with http_server(state.handle) as url:
        state.url = url
        yield state


def test_submit_sends_spec_platform_spec_and_run_id_with_the_token_from_the_environment(kfp, package, monkeypatch):
    monkeypatch.setenv("KFP_TOKEN", "tok-from-env-0123456789")
    done = submit(package, host=kfp.url, experiment="taxi-nightly", run_name="nightly-1", params={}, namespace=NS)
    assert done.run_id == "run-123" and done.url.endswith("/#/runs/details/run-123")
    (run,) = kfp.runs()
    assert run["headers"]["authorization"] == "Bearer tok-from-env-0123456789"
    body = run["body"]
    assert body["display_name"] == "nightly-1" and body["experiment_id"] == "exp-1"
    assert body["pipeline_spec"]["pipeline_spec"]["schemaVersion"] == "2.1.0"
    assert "kubernetes" in body["pipeline_spec"]["platform_spec"]["platforms"]
    run_id = body["runtime_config"]["parameters"]["pipeline-run-id"]
    assert run_id.startswith("nightly-1-")
    assert (
        body["runtime_config"]["pipeline_root"] == "minio://mlpipeline/private-artifacts/team-a/v2/artifacts/torchtfx"
    )
    assert "tok-from-env" not in json.dumps(body) and helpers.find_credentials(json.dumps(body)) == []


def test_the_run_carries_the_packages_pipeline_root(kfp, package):
    """The backend takes the run's pipeline_root, else the namespace's kfp-launcher ConfigMap, never the spec's
    defaultPipelineRoot: without it the artifacts would land in the namespace's default root. A per-namespace
    root is recorded in the package (not the spec's defaultPipelineRoot) and filled in here."""
    spec = yaml.safe_load_all(package.read_text()).__next__()
    assert "defaultPipelineRoot" not in spec
    done = submit(package, host=kfp.url, experiment="taxi", run_name="r", namespace=NS)
    (run,) = kfp.runs()
    assert run["body"]["runtime_config"]["pipeline_root"] == done.pipeline_root
    assert done.pipeline_root == recorded(spec).root_template.replace("{namespace}", NS)
    assert "{namespace}" not in json.dumps(run["body"]["runtime_config"])


def test_a_package_compiled_before_the_root_was_recorded_still_gets_its_namespace(kfp, package, tmp_path):
    spec, platform = yaml.safe_load_all(package.read_text())
    old = tmp_path / "old.yaml"
    template = "minio://mlpipeline/private-artifacts/{namespace}/v2/artifacts/old"
    old_spec = {**spec, "defaultPipelineRoot": template, "pipelineInfo": {"name": spec["pipelineInfo"]["name"]}}
    old.write_text(yaml.safe_dump_all([old_spec, platform]))
    done = submit(old, host=kfp.url, experiment="taxi", namespace=NS)
    assert done.pipeline_root == "minio://mlpipeline/private-artifacts/team-a/v2/artifacts/old"


def test_the_namespace_comes_from_the_kfp_context_when_not_given(kfp, package, monkeypatch):
    monkeypatch.setattr("kfp.Client.get_user_namespace", lambda self: "team-b")
    done = submit(package, host=kfp.url, experiment="taxi", run_name="r")
    assert done.pipeline_root == "minio://mlpipeline/private-artifacts/team-b/v2/artifacts/torchtfx"


def test_a_per_namespace_root_without_a_namespace_is_refused_before_any_run(kfp, package, monkeypatch):
    monkeypatch.setattr("kfp.Client.get_user_namespace", lambda self: "")
    with pytest.raises(SubmitError, match=r"is per namespace: pass --namespace"):
        submit(package, host=kfp.url, experiment="taxi")
    assert kfp.runs() == []


def test_a_root_of_another_namespace_is_refused_with_the_rule(kfp, package, tmp_path):
    spec, platform = yaml.safe_load_all(package.read_text())
    other = tmp_path / "other.yaml"
    root = "minio://mlpipeline/private-artifacts/team-b/v2/artifacts/torchtfx"
    other.write_text(yaml.safe_dump_all([{**spec, "defaultPipelineRoot": root}, platform]))
    with pytest.raises(SubmitError, match=r"belongs to namespace 'team-b', but the run goes to 'team-a'.*private-art"):
        submit(other, host=kfp.url, experiment="taxi", namespace=NS)
    assert kfp.runs() == []


def test_a_package_whose_root_the_launcher_cannot_use_is_refused(kfp, package, tmp_path):
    spec, platform = yaml.safe_load_all(package.read_text())
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump_all([{**spec, "defaultPipelineRoot": "/mnt/torchtfx/root"}, platform]))
    with pytest.raises(SubmitError, match=r"not a gs://, s3:// or minio:// bucket.*recompile"):
        submit(old, host=kfp.url, experiment="taxi")
    assert kfp.runs() == []


def test_submit_reuses_the_experiment(kfp, package):
    submit(package, host=kfp.url, experiment="taxi", run_name="a", namespace=NS)
    submit(package, host=kfp.url, experiment="taxi", run_name="b", namespace=NS)
    assert len(kfp.experiments) == 1 and len(kfp.runs()) == 2


def test_unknown_parameter_and_missing_package_are_refused(kfp, package, tmp_path):
    with pytest.raises(SubmitError, match=r"unknown pipeline parameters \['epochs'\]"):
        submit(package, host=kfp.url, experiment="taxi", params={"epochs": "3"})
    with pytest.raises(SubmitError, match="run `torchtfx compile` first"):
        submit(tmp_path / "missing.yaml", host=kfp.url, experiment="taxi")
    assert kfp.runs() == []


def test_a_package_with_an_alias_bomb_is_refused_by_the_guarded_loader(kfp, tmp_path):
    """The package is the user's file: read with the guarded loader, like every YAML the user gives."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(f"schemaVersion: 2.1.0\nlaughs: {ALIAS_BOMB}---\n{{}}\n")
    with pytest.raises(SubmitError, match=rf"^{bomb}:\d+: the aliases in this value expand to more than 100,000"):
        submit(bomb, host=kfp.url, experiment="taxi")
    assert kfp.runs() == []


def test_refused_run_says_why(kfp, package):
    kfp.run_code = 403
    with pytest.raises(SubmitError, match=r"403.*KFP_TOKEN"):
        submit(package, host=kfp.url, experiment="taxi", run_name="x", namespace=NS)


# ------------------------------------------------------------------ the server's backend version


def test_a_package_for_a_newer_backend_than_the_server_is_refused_before_the_run(kfp, package_2_16):
    """KFP 2.15 (Kubeflow 1.11) compiles each run's executor configs with a strict protojson.Unmarshal
    (backend/src/v2/compiler/argocompiler/container.go:309@2.15.0) and would refuse the 2.16 securityContext
    with an opaque server error; submit names both versions and the fix before creating anything."""
    from torchtfx.pipeline.cli.kubeflow import submit_cmd

    kfp.tag_name = "2.15.0"
    refusal = r"compiled for Kubeflow Pipelines backend 2.16, but the server runs 2\.15\.0"
    with pytest.raises(SubmitError, match=refusal):
        submit(package_2_16, host=kfp.url, experiment="taxi", run_name="r", namespace=NS)
    args = ["--package", str(package_2_16), "--host", kfp.url, "--namespace", NS]
    result = CliRunner().invoke(submit_cmd, args)
    assert result.exit_code == 1 and "torchtfx compile --kfp-backend 2.15" in result.output, result.output
    assert "Traceback" not in result.output and kfp.runs() == [] and kfp.experiments == []


@pytest.mark.parametrize("tag", ["2.16.0", "2.17.0"])
def test_a_package_for_the_servers_backend_or_older_goes_and_keeps_its_record(kfp, package_2_16, tag):
    kfp.tag_name = tag
    submit(package_2_16, host=kfp.url, experiment="taxi", run_name="r", namespace=NS)
    (run,) = kfp.runs()
    description = run["body"]["pipeline_spec"]["pipeline_spec"]["pipelineInfo"]["description"]
    assert json.loads(description.removeprefix("torchtfx "))["kfp_backend"] == "2.16"  # the spec the server keeps
    assert "pipeline-run-id" not in run["body"]["runtime_config"].get("parameters", {})  # the run's UUID instead


def test_a_server_whose_version_cannot_be_read_gets_the_run_with_a_warning(kfp, package_2_16, caplog):
    kfp.tag_name = "unknown"  # an API server image built without TAG_NAME (backend/Dockerfile:66@2.16.0)
    submit(package_2_16, host=kfp.url, experiment="taxi", run_name="r", namespace=NS)
    assert len(kfp.runs()) == 1
    assert "could not read the Kubeflow Pipelines server's version" in caplog.text
    assert "torchtfx compile --kfp-backend <server version>" in caplog.text


def test_a_package_for_the_oldest_backend_runs_on_any_server(kfp, package):
    kfp.tag_name = "2.1.0"
    submit(package, host=kfp.url, experiment="taxi", run_name="r", namespace=NS)
    assert len(kfp.runs()) == 1


# ------------------------------------------------------------------ submit --wait


class FakeClock:
    """Simulated time: sleep() advances the clock instantly."""

    def __init__(self) -> None:
        self.now, self.sleeps = 0.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def follow(kfp, package, timeout: float = 600, poll: float = 30) -> tuple[list[str], FakeClock, object]:
    """Submit, then follow the run with the real kfp.Client polling the fake server; simulated clock."""
    client = connect(kfp.url, NS)
    done = submit(package, host=kfp.url, experiment="taxi", run_name="ci-1", client=client, namespace=NS)
    lines, clock = [], FakeClock()
    try:
        outcome = RunFollower(client, lines.append, sleep=clock.sleep, clock=clock).follow(done.run_id, timeout, poll)
    except SubmitError as err:
        outcome = err
    return lines, clock, outcome


def test_wait_reports_each_change_once_and_retries_a_transient_error(kfp, package):
    kfp.statuses = [
        run_status("PENDING"),
        run_status("RUNNING", {"CsvExampleGen": "RUNNING"}),
        run_status("RUNNING", {"CsvExampleGen": "RUNNING"}),
        503,  # the API server restarting: asked again at the next poll
        run_status("RUNNING", {"CsvExampleGen": "SUCCEEDED", "StatisticsGen": "RUNNING"}),
        run_status("SUCCEEDED", {"CsvExampleGen": "SUCCEEDED", "StatisticsGen": "SUCCEEDED"}),
    ]
    lines, clock, outcome = follow(kfp, package)
    assert outcome.succeeded and outcome.state == "SUCCEEDED" and outcome.error == ""
    assert lines == [
        "[0:00:00] run: PENDING",
        "[0:00:30] run: RUNNING",
        "[0:00:30]   CsvExampleGen: RUNNING",
        "[0:02:00]   CsvExampleGen: SUCCEEDED",
        "[0:02:00]   StatisticsGen: RUNNING",
        "[0:02:30] run: SUCCEEDED",
        "[0:02:30]   StatisticsGen: SUCCEEDED",
    ]
    assert clock.sleeps == [30] * 5 and len(kfp.run_gets()) == 6
    assert kfp.run_gets()[0]["path"] == "/apis/v2beta1/runs/run-123"


def test_a_failed_run_names_its_failed_step(kfp, package):
    kfp.statuses = [run_status("FAILED", {"CsvExampleGen": "SUCCEEDED", "TorchTrainer": "FAILED"}, "task failed")]
    _, clock, outcome = follow(kfp, package)
    assert not outcome.succeeded and outcome.state == "FAILED" and clock.sleeps == []
    assert outcome.error == "task failed; TorchTrainer: task failed"


def test_the_wait_is_bounded(kfp, package):
    kfp.statuses = [run_status("RUNNING")]
    _, clock, outcome = follow(kfp, package, timeout=100, poll=30)
    assert isinstance(outcome, RunTimeoutError) and "still RUNNING after 0:01:40" in str(outcome)
    assert clock.sleeps == [30, 30, 30, 10] and len(kfp.run_gets()) == 5


def test_a_refused_poll_stops_the_wait_with_the_reason(kfp, package):
    kfp.statuses = [403]
    _, clock, outcome = follow(kfp, package)
    assert isinstance(outcome, SubmitError) and not isinstance(outcome, RunTimeoutError)
    assert "refused to report run run-123: 403" in str(outcome) and "KFP_TOKEN" in str(outcome)
    assert clock.sleeps == []


@pytest.mark.parametrize(
    ("statuses", "extra", "code", "expected"),
    [
        ([run_status("SUCCEEDED")], [], 0, "Run ci-2 SUCCEEDED"),
        (
            [run_status("FAILED", {"Evaluator": "FAILED"}, "blessing failed")],
            [],
            1,
            "Error: run ci-2 (id run-123) ended FAILED: blessing failed; Evaluator: blessing failed",
        ),
        ([run_status("CANCELED")], [], 1, "ended CANCELED"),
        # 0.0001 minutes: the first poll sees RUNNING, the wait sleeps out the 6 ms left and gives up.
        ([run_status("RUNNING")], ["--timeout", "0.0001"], 124, "still RUNNING after 0:00:00 (--timeout)"),
    ],
)
def test_submit_wait_exit_code_says_how_the_run_ended(kfp, package, statuses, extra, code, expected):
    from torchtfx.pipeline.cli.kubeflow import submit_cmd

    kfp.statuses = statuses
    args = ["--package", str(package), "--host", kfp.url, "--namespace", NS, "--run-name", "ci-2", "--wait", *extra]
    result = CliRunner().invoke(submit_cmd, args)
    assert result.exit_code == code, result.output
    assert expected in result.output
    assert "Artifacts go to minio://mlpipeline/private-artifacts/team-a/v2/artifacts/torchtfx" in result.output
    assert "[0:00:00] run: " in result.output


def test_submit_without_wait_does_not_poll(kfp, package):
    from torchtfx.pipeline.cli.kubeflow import submit_cmd

    result = CliRunner().invoke(submit_cmd, ["--package", str(package), "--host", kfp.url, "--namespace", NS])
    assert result.exit_code == 0, result.output
    assert len(kfp.runs()) == 1 and kfp.run_gets() == []
