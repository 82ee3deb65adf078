"""The pipeline run id on Kubeflow, for runs ``torchtfx submit`` does not start (the KFP UI, recurring runs,
the plain SDK).

TFX makes ``pipeline-run-id`` a required root parameter without a default, which the steps that tag the
registry and MLflow (ChampionModel, Promoter: ``run_token``) read. A run created elsewhere then needs a value
typed in by hand, and a recurring run repeats the one it was created with. A root parameter cannot default to
a placeholder: the API server copies root defaults into the run verbatim (argocompiler/argo.go:76-77@2.5.0,
:101-102@2.17.0). What the driver does substitute is a task input's constant ``{{$.pipeline_job_uuid}}``: the
run's own UUID (backend/src/v2/driver/driver.go:1648-1649@2.5.0, resolve.go:398@2.14.0, :424@2.15.0,
:440@2.17.0; kfp 2.5.0 names it ``kfp.dsl.PIPELINE_JOB_ID_PLACEHOLDER``). The 2.1-2.4 drivers substitute no
placeholder at all (added by kubeflow/pipelines#11599, first in 2.5.0), so for those backends the parameter stays
and ``submit`` passes it."""

from __future__ import annotations

from typing import Any

RUN_ID_PARAMETER = "pipeline-run-id"
# The first backend whose driver substitutes {{$.pipeline_job_uuid}} in a task's inputs.
PLACEHOLDER_BACKEND = (2, 5)


def job_uuid_placeholder() -> str:
    from kfp import dsl

    return dsl.PIPELINE_JOB_ID_PLACEHOLDER


def bind_run_id(spec: dict[str, Any], backend: tuple[int, int]) -> bool:
    """From 2.5, every task input bound to the run-id parameter takes the run's UUID instead, and the parameter is
    dropped, so that every run, however created, has its own id. Returns whether it did."""
    if backend < PLACEHOLDER_BACKEND:
        return False
    placeholder = {"runtimeValue": {"constant": job_uuid_placeholder()}}
    for task in spec["root"]["dag"]["tasks"].values():
        parameters = task.get("inputs", {}).get("parameters", {})
        for name, source in parameters.items():
            if source.get("componentInputParameter") == RUN_ID_PARAMETER:
                parameters[name] = dict(placeholder)
    root_inputs = spec["root"].get("inputDefinitions", {})
    root_inputs.get("parameters", {}).pop(RUN_ID_PARAMETER, None)
    if not root_inputs.get("parameters"):
        spec["root"].pop("inputDefinitions", None)
    return True


def header_without_run_id(header: str) -> str:
    """TFX's ``# Inputs:`` comment lines without the dropped parameter (and the heading once nothing is left)."""
    lines = [line for line in header.splitlines() if line.strip("# ") != f"{RUN_ID_PARAMETER}: str"]
    if lines and lines[-1] == "# Inputs:":
        lines.pop()
    return "".join(line + "\n" for line in lines)
