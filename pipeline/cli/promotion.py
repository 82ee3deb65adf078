"""``torchtfx promote`` (rollback, manual override) and ``torchtfx report``."""

from __future__ import annotations

from pathlib import Path

import click

from torchtfx.pipeline.cli.errors import reports_errors
from torchtfx.pipeline.cli.setting_options import declared_option

_root_option = declared_option("pipeline_root", "pipeline_root")
_dataset_option = declared_option("dataset", "dataset", help="Dataset the model serves.")
_serving_option = declared_option("serving_dir", "serving_dir")


def local_settings(dataset: str, pipeline_root: Path, serving_dir: Path | None, serving_address: str | None = None):
    from torchtfx.data.config.dataset import load_dataset_config
    from torchtfx.pipeline.local.runner import LocalSettings

    return LocalSettings(
        dataset=load_dataset_config(dataset),
        pipeline_root=pipeline_root,
        serving_dir=serving_dir,
        serving_address=serving_address,
    )


def serving_target(settings):
    from torchtfx.components.promoter.public import ServingTarget
    from torchtfx.components.shared.mlflow_client import Registry, resolve_tracking_uri

    registry = Registry(resolve_tracking_uri(settings.mlflow_default_uri), settings.registered_model_name)
    return ServingTarget(
        settings.serving_model_dir,
        settings.dataset.name,
        registry,
        settings.batching,
        server_address=settings.serving_address,
    )


@click.command()
@_dataset_option
@_root_option
@_serving_option
@click.option(
    "--rollback",
    is_flag=True,
    help="Make the previous champion the champion again; a pending promotion (not confirmed, or not loaded) is "
    "what it undoes.",
)
@click.option(
    "--finish",
    is_flag=True,
    help="Confirm that TF Serving loaded the version the last promotion staged and move the stable/canary labels "
    "onto it (check first that TF Serving has it AVAILABLE, or give --serving-address to have it checked); with "
    "nothing pending, rewrite this model's labels in models.config from the registry.",
)
@click.option("--version", "registry_version", type=int, help="Make this registry version the champion.")
@click.option("--reason", default="", help="Why (required with --version; recorded in the registry).")
@declared_option("serving_address", "serving_address", metavar="HOST:PORT")
@reports_errors()
def promote(dataset, pipeline_root, serving_dir, rollback, finish, registry_version, reason, serving_address):
    """Roll back to the previous champion, promote a registered version by hand, or finish a label move."""
    from torchtfx.components.promoter import public as promotion

    if sum([rollback, finish, registry_version is not None]) != 1:
        raise click.UsageError("give exactly one of --rollback, --finish or --version N")
    target = serving_target(local_settings(dataset, pipeline_root, serving_dir, serving_address))
    if rollback:
        message = promotion.rollback(target)
    elif finish:
        message = promotion.finish(target)
    else:
        message = promotion.set_champion(target, registry_version, reason)
    click.echo(message)


@click.command()
@_dataset_option
@_root_option
@reports_errors()
def report(dataset, pipeline_root):
    """Write (or rewrite) the HTML report of the latest run and print its path."""
    from tfx.orchestration import metadata

    from torchtfx.pipeline.reporting.html_report import build_report
    from torchtfx.pipeline.reporting.summary import latest_run

    settings = local_settings(dataset, pipeline_root, None)
    if not settings.metadata_path.is_file():
        raise click.ClickException(f"no pipeline runs under {settings.root} (no {settings.metadata_path.name})")
    summary = latest_run(metadata.sqlite_metadata_connection_config(str(settings.metadata_path)))
    if summary is None:
        raise click.ClickException(f"no pipeline runs recorded in {settings.metadata_path}")
    click.echo(build_report(summary, settings.root, settings.mlflow_default_uri))
