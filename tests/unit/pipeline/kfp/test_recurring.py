"""`torchtfx submit --recurring CRON` against the fake Kubeflow Pipelines API server (tests/fakes/kfp_api.py) with
the real ``kfp.Client`` (kfp 2.5.0 ``create_recurring_run``): the request body is the client's own."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tests.fakes.http_server import http_server
from tests.fakes.kfp_api import FakeKfp
from tests.paths import PROJECT_ROOT
from torchtfx.pipeline.cli.kubeflow import submit_cmd
from torchtfx.pipeline.kfp.compile import compile_pipeline
from torchtfx.pipeline.kfp.config import load_kubeflow_settings
from torchtfx.pipeline.kfp.recurring import check_cron
from torchtfx.pipeline.kfp.submit import SubmitError

NS = "team-a"


def _compiled(tmp_path_factory, backend: str):
    output = tmp_path_factory.mktemp(f"pkg{backend}") / "torchtfx-taxi.yaml"
    return compile_pipeline(load_kubeflow_settings(PROJECT_ROOT / "kubeflow" / "pools.yaml", backend), output)


@pytest.fixture(scope="module")
def package_2_15(tmp_path_factory):
    return _compiled(tmp_path_factory, "2.15")


@pytest.fixture(scope="module")
def package_2_4(tmp_path_factory):
    return _compiled(tmp_path_factory, "2.4")


@pytest.fixture
def kfp():
    state = FakeKfp()
    with http_server(state.handle) as url:
        state.url = url
        yield state


def submit(package, kfp, *extra):
    args = ["--package", str(package), "--host", kfp.url, "--namespace", NS, *extra]
    return CliRunner().invoke(submit_cmd, args)


def test_a_six_field_cron_creates_one_recurring_run_at_a_time_of_the_package(kfp, package_2_15):
    result = submit(package_2_15, kfp, "--recurring", "0 0 2 * * *", "--run-name", "nightly", "--experiment", "taxi")
    assert result.exit_code == 0, result.output
    assert "Created recurring run nightly (id rr-1) in experiment taxi: '0 0 2 * * *'" in result.output
    assert result.output.rstrip().endswith("/#/recurringrun/details/rr-1")
    (created,) = kfp.recurring_runs
    assert created["trigger"] == {"cron_schedule": {"cron": "0 0 2 * * *"}}
    assert int(created["max_concurrency"]) == 1 and created["mode"] == "ENABLE" and created["no_catchup"] is True
    assert created["display_name"] == "nightly" and created["experiment_id"] == "exp-1"
    spec = created["pipeline_spec"]["pipeline_spec"]
    assert spec["pipelineInfo"]["name"] == "torchtfx-taxi"
    assert '"kfp_backend": "2.15"' in spec["pipelineInfo"]["description"]
    assert "kubernetes" in created["pipeline_spec"]["platform_spec"]["platforms"]
    assert (
        created["runtime_config"]["pipeline_root"]
        == "minio://mlpipeline/private-artifacts/team-a/v2/artifacts/torchtfx"
    )
    assert "pipeline-run-id" not in created["runtime_config"].get("parameters", {})  # each run takes its own UUID
    assert kfp.runs() == []


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        ("0 2 * * *", r"has 5 fields.*reads the first as seconds.*--recurring '0 0 2 \* \* \*'"),
        ("0 61 2 * * *", r"the minute field '61' is outside 0-59"),
        ("0 0 2 * * * *", r"has 7 fields\. Kubeflow Pipelines takes 6 fields, seconds first"),
        ("0 0 two * * *", r"the hour field 'two' is not a number"),
        ("@nightly", r"not a schedule Kubeflow Pipelines knows.*'@every 6h'"),
    ],
)
def test_a_cron_the_server_would_misread_or_refuse_is_refused_before_any_request(kfp, package_2_15, cron, expected):
    result = submit(package_2_15, kfp, "--recurring", cron)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1
    with pytest.raises(SubmitError, match=expected):
        check_cron(cron)
    assert kfp.requests == []


@pytest.mark.parametrize(
    "cron",
    [
        "0 0 2 * * *",
        "0 30 6 * * mon-fri",
        "0 0 9 ? * 2-6",
        "*/30 * * * * *",
        "0 0 0 1 jan,jul *",
        "@daily",
        "@every 1h30m",
        "0 0 3 1-31/2 * ?",
    ],
)
def test_robfig_cron_schedules_pass(cron):
    assert check_cron(f"  {cron} ") == cron


def test_a_package_for_backend_2_4_is_refused_naming_the_fix(kfp, package_2_4):
    result = submit(package_2_4, kfp, "--recurring", "0 0 2 * * *")
    assert result.exit_code == 1, result.output
    assert "compiled for Kubeflow Pipelines backend 2.4" in result.output
    assert "every run of a recurring run would repeat one id" in result.output
    assert "torchtfx compile --kfp-backend <server version>" in result.output
    assert kfp.requests == []


def test_recurring_with_wait_is_a_usage_error(kfp, package_2_15):
    result = submit(package_2_15, kfp, "--recurring", "@daily", "--wait")
    assert result.exit_code == 2 and "a --recurring schedule has none to follow" in result.output
    assert kfp.requests == []
