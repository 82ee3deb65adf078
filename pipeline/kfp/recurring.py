"""``torchtfx submit --recurring CRON``: a KFP recurring run of a compiled package.

Every supported API server (2.1-2.17) checks the schedule with robfig/cron v1.2.0's ``cron.Parse``
(backend/src/apiserver/server/api_converter.go:1919@2.1.0, :1974@2.15.0; go.mod ``robfig/cron v1.2.0``), and the
ScheduledWorkflow controller runs it with the same parser (backend/src/crd/controller/scheduledworkflow/util/
cron_schedule.go:84@2.15.0). That parser takes 6 fields with SECONDS first, the day of week optional, plus
``@daily``-style descriptors and ``@every <duration>`` (robfig/cron parser.go:174-185, :318-379@v1.2.0). So the
usual 5-field ``0 2 * * *`` is accepted and means minute 2 of every hour: it is refused here, naming the 6-field
form. The server also refuses a max concurrency outside 1..10 (api_converter.go:1970@2.15.0); ours is 1."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from torchtfx.pipeline.kfp.package_info import recorded
from torchtfx.pipeline.kfp.run_id import PLACEHOLDER_BACKEND, RUN_ID_PARAMETER
from torchtfx.pipeline.kfp.submit import SubmitError, prepare_run, refused

# Runs on one pipeline root must not overlap (the pipeline's run lock would refuse the second one anyway).
MAX_CONCURRENCY = 1
FORMAT = (
    "Kubeflow Pipelines takes 6 fields, seconds first: 'second minute hour day-of-month month day-of-week' "
    "(e.g. '0 0 2 * * *' daily at 02:00), or @hourly, @daily, @weekly, @monthly, @yearly, '@every 6h'"
)
_DESCRIPTORS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
# Go's time.ParseDuration, which reads '@every <duration>'.
_DURATION = re.compile(r"[+-]?(0|((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)")
_MONTHS = {m: i + 1 for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())}
_DAYS = {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}
# name, bounds and names of each field (robfig/cron spec.go:18-46@v1.2.0)
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("second", 0, 59, {}),
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _DAYS),
)


@dataclasses.dataclass(frozen=True)
class RecurringSubmission:
    recurring_run_id: str
    name: str
    experiment: str
    cron: str
    url: str | None
    pipeline_root: str | None = None


def check_cron(expression: str) -> str:
    """The schedule as the server will read it, or a SubmitError naming the problem and the 6-field fix."""
    cron = " ".join(expression.split())
    if cron.startswith("@"):
        if cron in _DESCRIPTORS or (cron.startswith("@every ") and _DURATION.fullmatch(cron[len("@every ") :])):
            return cron
        raise SubmitError(f"--recurring {expression!r} is not a schedule Kubeflow Pipelines knows. {FORMAT}")
    fields = cron.split(" ")
    if len(fields) == 5:
        raise SubmitError(
            f"--recurring {expression!r} has 5 fields, but Kubeflow Pipelines reads the first as seconds, so it "
            f"would not mean what cron(8) means. Prefix '0 ' for the seconds: --recurring '0 {cron}'. {FORMAT}"
        )
    if len(fields) != 6:
        raise SubmitError(f"--recurring {expression!r} has {len(fields)} fields. {FORMAT}")
    for field, (name, low, high, names) in zip(fields, _FIELDS, strict=True):
        problem = _field_problem(field, low, high, names)
        if problem:
            raise SubmitError(f"--recurring {expression!r}: the {name} field {field!r} {problem}. {FORMAT}")
    return cron


def _field_problem(field: str, low: int, high: int, names: dict[str, int]) -> str | None:
    """What robfig/cron's getRange refuses in one field (parser.go:205-269@v1.2.0), or None."""
    for part in filter(None, field.split(",")):
        range_step = part.split("/")
        bounds = range_step[0].split("-")
        if len(range_step) > 2 or len(bounds) > 2:
            return f"has too many '/' or '-' in {part!r}"
        start: int | None
        end: int | None
        if bounds[0] in ("*", "?"):
            start, end = low, high
        else:
            start, end = _number(bounds[0], names), _number(bounds[-1], names)
        step = _number(range_step[1], {}) if len(range_step) == 2 else 1
        if start is None or end is None or step is None:
            return f"is not a number, a range or a list in {part!r}"
        if len(range_step) == 2 and len(bounds) == 1:
            end = high  # 'N/step' means 'N-max/step'
        if start < low or end > high or start > end or step == 0:
            return f"is outside {low}-{high} (or a range backwards, or step 0) in {part!r}"
    return None


def _number(text: str, names: dict[str, int]) -> int | None:
    if text.lower() in names:
        return names[text.lower()]
    return int(text) if re.fullmatch(r"\+?\d+", text) else None


def check_run_id(spec: dict[str, Any], package: Path) -> None:
    """A package for backend 2.1-2.4 takes the run id as a parameter: every run of a recurring run would repeat
    the one value it was created with (run_id.py), tagging the registry and MLflow alike."""
    declared = spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})
    if RUN_ID_PARAMETER in declared:
        backend = recorded(spec).kfp_backend or "2.1-2.4"
        oldest = ".".join(map(str, PLACEHOLDER_BACKEND))
        raise SubmitError(
            f"{package} was compiled for Kubeflow Pipelines backend {backend}, whose runs take the run id as the "
            f"{RUN_ID_PARAMETER} parameter: every run of a recurring run would repeat one id. Recompile for the "
            f"server (backend {oldest} or newer): `torchtfx compile --kfp-backend <server version>`"
        )


def submit_recurring(
    package: Path,
    *,
    host: str | None,
    experiment: str,
    cron: str,
    run_name: str | None = None,
    params: dict[str, str] | None = None,
    namespace: str | None = None,
    enable_caching: bool | None = None,
    client: Any = None,
) -> RecurringSubmission:
    """Create (or reuse) ``experiment`` and a recurring run of ``package`` on ``cron``; every check that needs no
    server is done before the server is contacted."""
    cron = check_cron(cron)
    run = prepare_run(
        package, run_name, params, host, namespace, client, "-recurring", lambda spec: check_run_id(spec, package)
    )
    try:
        created = run.client.create_recurring_run(
            experiment_id=run.client.create_experiment(experiment, namespace=namespace).experiment_id,
            job_name=run.name,
            cron_expression=cron,
            max_concurrency=MAX_CONCURRENCY,
            no_catchup=True,  # after a pause, one run, not one per missed slot
            params=run.arguments,
            pipeline_package_path=str(package),
            pipeline_root=run.root,
            enable_caching=enable_caching,
            enabled=True,
        )
    except Exception as err:
        raise refused(err, "recurring run") from None
    rid = created.recurring_run_id
    url = f"{host.rstrip('/')}/#/recurringrun/details/{rid}" if host else None  # frontend Router.tsx:123@2.15.0
    return RecurringSubmission(rid, run.name, experiment, cron, url, run.root)
