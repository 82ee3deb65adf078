"""Runs not started by `torchtfx submit` (KFP UI, recurring runs, the plain SDK) each get their own run id: from
backend 2.5 the steps take the run's UUID through the driver's ``{{$.pipeline_job_uuid}}`` (run_id.py cites the
sources), and the emulated driver (tests/fakes/kfp_launcher.py) resolves the compiled inputs as the real one."""

from __future__ import annotations

import pytest
import yaml

from tests.fakes.kfp_launcher import parameter_values
from tests.paths import PROJECT_ROOT
from torchtfx.pipeline.kfp.compile import compile_pipeline
from torchtfx.pipeline.kfp.config import load_kubeflow_settings
from torchtfx.pipeline.kfp.run_id import RUN_ID_PARAMETER

POOLS = PROJECT_ROOT / "kubeflow" / "pools.yaml"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    def compile_for(backend: str):
        out = tmp_path_factory.mktemp(f"b{backend}") / "pipeline.yaml"
        compile_pipeline(load_kubeflow_settings(POOLS, backend), out)
        return out.read_text()

    return {backend: compile_for(backend) for backend in ("2.1", "2.15")}


def _run_token_tasks(spec: dict) -> dict[str, dict]:
    tasks = spec["root"]["dag"]["tasks"].items()
    return {name: t["inputs"]["parameters"] for name, t in tasks if "run_token" in t["inputs"].get("parameters", {})}


def test_from_2_5_each_run_however_created_gets_its_own_run_id(compiled, tmp_path):
    from kfp.client.client import _extract_pipeline_yaml

    text = compiled["2.15"]
    spec, _ = yaml.safe_load_all(text)
    assert RUN_ID_PARAMETER not in text  # no parameter for the UI or a recurring run to fill in, not even the header
    tokens = _run_token_tasks(spec)
    assert set(tokens) == {"ChampionModel", "Promoter"}
    for parameters in tokens.values():
        assert parameters["run_token"] == {"runtimeValue": {"constant": "{{$.pipeline_job_uuid}}"}}
    seen = {
        run: {
            name: parameter_values(task, {}, run, (2, 15))["run_token"]
            for name, task in spec["root"]["dag"]["tasks"].items()
            if name in tokens
        }
        for run in ("6f1c-run-a", "93d2-run-b")
    }
    assert seen == {run: {"ChampionModel": run, "Promoter": run} for run in seen}
    (tmp_path / "pipeline.yaml").write_text(text)
    _extract_pipeline_yaml(str(tmp_path / "pipeline.yaml"))  # the kfp client still reads the package


def test_before_2_5_the_parameter_stays_for_submit_to_pass(compiled):
    """The 2.1-2.4 drivers substitute no placeholder (it would reach the step verbatim), so submit passes the id."""
    spec, _ = yaml.safe_load_all(compiled["2.1"])
    assert spec["root"]["inputDefinitions"]["parameters"][RUN_ID_PARAMETER] == {"parameterType": "STRING"}
    for parameters in _run_token_tasks(spec).values():
        assert parameters["run_token"] == {"componentInputParameter": RUN_ID_PARAMETER}
    task = spec["root"]["dag"]["tasks"]["Promoter"]
    assert parameter_values(task, {RUN_ID_PARAMETER: "given"}, "uuid", (2, 3))["run_token"] == "given"
