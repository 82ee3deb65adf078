"""``torchtfx compile`` and ``torchtfx submit``: Kubeflow Pipelines, as two separate steps."""

from __future__ import annotations

from pathlib import Path

import click

from torchtfx.components.shared import contracts
from torchtfx.data.config.serving import PRECISIONS
from torchtfx.pipeline.cli.errors import USER_ERRORS


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
@click.option("--model", "model_factory", help="Model factory, as for `torchtfx run --model` [default: pools.yaml's].")
@click.option("--model-hparam", "model_hparams", multiple=True, metavar="KEY=VALUE", help="Repeatable.")
@click.option(
    "--serving-precision",
    type=click.Choice(PRECISIONS),
    help="fp16: serve a reduced-precision network if the drift gate passes it [default: pools.yaml's].",
)
def compile_cmd(
    config_path: Path,
    output: Path | None,
    target: str,
    model_factory: str | None,
    model_hparams: tuple[str, ...],
    serving_precision: str | None,
) -> None:
    """Compile the pipeline to a KFP pipeline spec (schema 2.1.0) with its PlatformSpec appended. A model
    file is embedded in the spec, so the Trainer step and every PyTorchJob replica load that code."""
    from torchtfx.pipeline.kfp.compile import compile_pipeline, compile_vertex_job
    from torchtfx.pipeline.kfp.config import load_kubeflow_settings, with_model

    try:
        settings = with_model(load_kubeflow_settings(config_path), model_factory, model_hparams, serving_precision)
        suffix = ".yaml" if target == "kfp" else ".json"
        output = output or Path("kubeflow/build") / f"{contracts.pipeline_name(Path(settings.dataset).stem)}{suffix}"
        (compile_pipeline if target == "kfp" else compile_vertex_job)(settings, output)
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
def submit_cmd(package, host, experiment, run_name, namespace, params, no_cache) -> None:
    """Submit a compiled spec to Kubeflow Pipelines. Credentials: KFP_TOKEN or KF_PIPELINES_SA_TOKEN_PATH
    in the environment, or the in-cluster service account; never command-line flags."""
    from torchtfx.pipeline.kfp.submit import SubmitError, submit

    try:
        done = submit(
            package,
            host=host,
            experiment=experiment,
            run_name=run_name,
            params=_parse_params(params),
            namespace=namespace,
            enable_caching=False if no_cache else None,
        )
    except SubmitError as err:
        raise click.ClickException(str(err)) from err
    click.echo(f"Submitted run {done.run_name} (id {done.run_id}) to experiment {done.experiment}")
    if done.url:
        click.echo(f"Follow it at {done.url}")
