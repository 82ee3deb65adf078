"""``torchtfx monitor``: the served requests against what the champion learned (pipeline/monitor/)."""

from __future__ import annotations

from pathlib import Path

import click

from torchtfx.pipeline.cli.errors import MOVED_EXIT_CODE, reports_errors
from torchtfx.pipeline.cli.setting_options import declared_option


@click.command("monitor")
@click.option(
    "--logs",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="The folder of sampled requests (*.tfrecord.gz of serialized tf.Examples) and/or CSV files scored by "
    "`torchtfx predict`.",
)
@declared_option("dataset", "dataset", help="The dataset the champion was trained on (name or YAML).")
@declared_option("pipeline_root", "pipeline_root")
@declared_option("serving_dir", "serving_dir")
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where each window's statistics and report go, a folder per window; the newest is the next window's "
    "drift baseline [default: <pipeline root>/monitor/<dataset>].",
)
@reports_errors(stage_prefix="monitor failed: ")
def monitor_cmd(logs, dataset, pipeline_root, serving_dir, out) -> None:
    """Compare what the server is asked with the champion's training data (skew) and with the previous window
    (drift), by the schema's comparators; write a report naming the features that moved. Exit code 5 when one
    did, so a scheduler can start a run."""
    from torchtfx.pipeline.cli.promotion import local_settings, serving_target
    from torchtfx.pipeline.monitor.run import MonitorRequest, monitor

    settings = local_settings(dataset, pipeline_root, serving_dir)
    out = out or settings.root / "monitor" / settings.dataset.name
    report = monitor(MonitorRequest(logs.resolve(), settings.dataset, serving_target(settings), out.resolve()))
    click.echo(f"{report.rows:,} requests compared; report: {report.folder / 'report.json'}")
    if report.uncompared:
        click.echo(f"Not compared (no drift_comparator in the schema): {', '.join(report.uncompared)}")
    if not report.findings:
        click.echo("Nothing moved: every served input is within its thresholds.")
        return
    click.echo(f"Moved: {', '.join(report.moved)}")
    for finding in report.findings:
        click.echo(f"  {finding.line()}")
    raise click.exceptions.Exit(MOVED_EXIT_CODE)
