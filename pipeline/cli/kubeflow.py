"""``torchtfx compile`` and ``torchtfx submit``: Kubeflow Pipelines, as two separate steps."""

from __future__ import annotations

from pathlib import Path

import click

from torchtfx.components.shared import contracts
from torchtfx.pipeline.cli.errors import USER_ERRORS, reports_errors
from torchtfx.pipeline.cli.setting_options import given_settings, setting_options
from torchtfx.pipeline.settings.declared import KUBEFLOW


@click.command("compile")
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    default=Path("kubeflow/pools.yaml"),
    show_default=True,
    help="Kubeflow configuration: image, storage, node pools, resources, Trainer GPUs.",
)
@click.option(
    "--output",
    type=click.Path(path_type=Path),
    help="Where to write the spec [default: kubeflow/build/torchtfx-<dataset>.yaml].",
)
@click.option(
    "--target",
    type=click.Choice(["kfp", "vertex"]),
    default="kfp",
    show_default=True,
    help="kfp: open-source Kubeflow Pipelines (.yaml + PlatformSpec); vertex: a Vertex AI PipelineJob (.json).",
)
@click.option(
    "--kfp-backend",
    metavar="MAJOR.MINOR",
    help="The cluster's Kubeflow Pipelines backend version (e.g. 2.15), over pools.yaml's kfp_backend.",
)
@setting_options(KUBEFLOW)
@reports_errors()
def compile_cmd(
    config_path: Path, output: Path | None, target: str, kfp_backend: str | None, **_options: object
) -> None:
    """Compile the pipeline to a KFP pipeline spec (schema 2.1.0) with its PlatformSpec appended. Each setting is
    the option's, else pools.yaml's, else the dataset YAML's, else the default (`torchtfx config show --config`
    lists them with their sources). A model file is embedded in the spec, so the Trainer step and every
    PyTorchJob replica load that code."""
    from torchtfx.pipeline.kfp.compile import compile_pipeline, compile_vertex_job
    from torchtfx.pipeline.kfp.config import load_kubeflow_settings, resolved_for_kubeflow

    try:
        settings = load_kubeflow_settings(config_path, kfp_backend)
        resolved = resolved_for_kubeflow(settings, given_settings(click.get_current_context(), KUBEFLOW))
        suffix = ".yaml" if target == "kfp" else ".json"
        output = output or Path("kubeflow/build") / f"{contracts.pipeline_name(resolved.dataset.name)}{suffix}"
        (compile_pipeline if target == "kfp" else compile_vertex_job)(settings, output, resolved)
    except USER_ERRORS as err:
        raise click.ClickException(str(err)) from err
    click.echo(f"Compiled pipeline spec: {output}")
    if target == "kfp":
        click.echo(f"Submit it with: torchtfx submit --package {output} --host <KFP API URL>")


def _parse_params(values: tuple[str, ...]) -> dict[str, str]:
    params = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{value!r} is not NAME=VALUE", param_hint="--param")
        params[name] = text
    return params


# `submit --wait` exit codes besides 0 (the run SUCCEEDED) and 1 (it ended FAILED, CANCELED or SKIPPED, or was
# refused): the run was still going when --timeout ran out (as GNU timeout(1) reports it).
WAIT_TIMEOUT_EXIT_CODE = 124


class _RunDidNotSucceed(click.ClickException):
    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@click.command("submit")
@click.option("--package", type=click.Path(path_type=Path), required=True, help="The compiled .yaml spec.")
@click.option(
    "--host",
    envvar="KFP_HOST",
    help="KFP API endpoint, e.g. http://localhost:8080 [env KFP_HOST; default: in-cluster].",
)
@click.option("--experiment", default="torchtfx", show_default=True)
@click.option("--run-name", help="[default: <pipeline>-<timestamp>]")
@click.option("--namespace", help="Kubeflow profile namespace (multi-user installs).")
@click.option("--param", "params", multiple=True, help="Pipeline parameter NAME=VALUE (repeatable).")
@click.option("--no-cache", is_flag=True, help="Disable KFP step caching for this run.")
@click.option(
    "--recurring",
    "cron",
    metavar="CRON",
    help="Create a recurring run instead: 6 cron fields, seconds first ('0 0 2 * * *' daily at 02:00), "
    "@daily, '@every 6h'; one run at a time. Needs a package for backend 2.5+.",
)
@click.option(
    "--wait",
    is_flag=True,
    help="Follow the run, printing each state change, and exit non-zero unless it SUCCEEDED (for CI).",
)
@click.option(
    "--timeout",
    "timeout_minutes",
    type=click.FloatRange(min=0, min_open=True),
    default=720.0,
    show_default=True,
    metavar="MINUTES",
    help=f"With --wait: stop waiting after this long (exit {WAIT_TIMEOUT_EXIT_CODE}; the run goes on).",
)
@click.option(
    "--poll-seconds",
    type=click.FloatRange(min=1),
    default=30.0,
    show_default=True,
    help="With --wait: how often to ask the KFP API.",
)
@reports_errors()
def submit_cmd(
    package, host, experiment, run_name, namespace, params, no_cache, cron, wait, timeout_minutes, poll_seconds
) -> None:
    """Submit a compiled spec to Kubeflow Pipelines, with the spec's pipeline root as the run's (the backend
    ignores the spec's own). Credentials: KFP_TOKEN or KF_PIPELINES_SA_TOKEN_PATH in the environment, or the
    in-cluster service account; never command-line flags."""
    from torchtfx.pipeline.kfp.submit import SubmitError, connect, read_package, submit

    if cron is not None:
        if wait:
            raise click.UsageError("--wait follows one run; a --recurring schedule has none to follow")
        _recurring(package, host, experiment, run_name, namespace, _parse_params(params), no_cache, cron)
        return
    try:
        read_package(package)  # a bad package is refused before the cluster is contacted
        client = connect(host, namespace)
        done = submit(
            package,
            host=host,
            experiment=experiment,
            run_name=run_name,
            params=_parse_params(params),
            namespace=namespace,
            enable_caching=False if no_cache else None,
            client=client,
        )
    except SubmitError as err:
        raise click.ClickException(str(err)) from err
    click.echo(f"Submitted run {done.run_name} (id {done.run_id}) to experiment {done.experiment}")
    click.echo(f"Artifacts go to {done.pipeline_root or 'the cluster default pipeline root (kfp-launcher)'}")
    if done.url:
        click.echo(f"Follow it at {done.url}")
    if wait:
        _wait(client, done, timeout_minutes * 60, poll_seconds)


def _recurring(package, host, experiment, run_name, namespace, params, no_cache: bool, cron: str) -> None:
    from torchtfx.pipeline.kfp.recurring import submit_recurring
    from torchtfx.pipeline.kfp.submit import SubmitError

    try:
        done = submit_recurring(
            package,
            host=host,
            experiment=experiment,
            cron=cron,
            run_name=run_name,
            params=params,
            namespace=namespace,
            enable_caching=False if no_cache else None,
        )
    except SubmitError as err:
        raise click.ClickException(str(err)) from err
    click.echo(
        f"Created recurring run {done.name} (id {done.recurring_run_id}) in experiment {done.experiment}: "
        f"{done.cron!r}, one run at a time"
    )
    click.echo(f"Artifacts go to {done.pipeline_root or 'the cluster default pipeline root (kfp-launcher)'}")
    if done.url:
        click.echo(f"See it at {done.url}")


def _wait(client, done, timeout_seconds: float, poll_seconds: float) -> None:
    from torchtfx.pipeline.kfp.follow import RunFollower, RunTimeoutError
    from torchtfx.pipeline.kfp.submit import SubmitError

    try:
        outcome = RunFollower(client, click.echo).follow(done.run_id, timeout_seconds, poll_seconds)
    except RunTimeoutError as err:
        raise _RunDidNotSucceed(str(err), WAIT_TIMEOUT_EXIT_CODE) from err
    except SubmitError as err:
        raise click.ClickException(str(err)) from err
    if not outcome.succeeded:
        raise _RunDidNotSucceed(
            f"run {done.run_name} (id {done.run_id}) ended {outcome.state}"
            + (f": {outcome.error}" if outcome.error else "")
        )
    click.echo(f"Run {done.run_name} SUCCEEDED")
