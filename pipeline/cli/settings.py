"""``torchtfx config show``: every setting of a run, resolved, with where its value came from."""

from __future__ import annotations

from pathlib import Path

import click

from torchtfx.pipeline.cli.errors import reports_errors
from torchtfx.pipeline.cli.setting_options import given_settings, setting_options
from torchtfx.pipeline.settings.declared import KUBEFLOW, LOCAL


@click.group("config")
def config_group() -> None:
    """The settings a run uses and where each comes from."""


@config_group.command("show")
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    help="A Kubeflow configuration (pools.yaml): show what `torchtfx compile --config` uses [default: none; show "
    "what `torchtfx run` uses].",
)
@setting_options(LOCAL, KUBEFLOW)
@reports_errors()
def show_cmd(config_path: Path | None, **_options: object) -> None:
    """Print every setting, its value and its source: the command line (the same options as `torchtfx run`, or
    `torchtfx compile` with --config), pools.yaml, the dataset YAML, or the default, in that precedence."""
    from torchtfx.pipeline.settings.resolve import resolve_settings
    from torchtfx.pipeline.settings.show import settings_table

    run = KUBEFLOW if config_path else LOCAL
    command_line = given_settings(click.get_current_context(), run)
    if config_path:
        from torchtfx.pipeline.kfp.config import load_kubeflow_settings, resolved_for_kubeflow

        resolved = resolved_for_kubeflow(load_kubeflow_settings(config_path), command_line)
    else:
        resolved = resolve_settings(LOCAL, command_line)
    resolved.check()  # settings that do not go together fail here, as they would in a run
    for line in settings_table(resolved):
        click.echo(line)
