"""The end-of-run report printed by ``torchtfx run``."""

from __future__ import annotations

import click

from pipeline.summary import RunSummary, slice_metrics

_SHOWN = ("auc", "auc_precision_recall", "binary_accuracy", "precision", "recall", "calibration", "example_count")


def print_run_report(summary: RunSummary, wall: float, settings) -> None:
    click.echo("")
    click.echo(f"Pipeline run {summary.run_id} finished in {wall:.1f} s")
    for stage in summary.stages:
        click.echo(f"  {stage.node:<20} {stage.state:<9} {stage.seconds:7.1f} s")
    evaluation = summary.output("Evaluator", "evaluation")
    if evaluation is not None:
        metrics = slice_metrics(evaluation.uri)
        overall = metrics.get("Overall", {})
        click.echo(
            "Evaluation (eval split, overall): " + ", ".join(f"{k}={overall[k]:.4f}" for k in _SHOWN if k in overall)
        )
        click.echo(f"  slices evaluated: {len(metrics)}; full results: {evaluation.uri}")
    click.echo(f"Blessed: {summary.blessed}")
    click.echo(f"Parity (max |SavedModel - PyTorch| on eval): {summary.parity}")
    click.echo(f"DDP workers: {summary.ddp_workers}")
    click.echo(f"Pushed model: {summary.pushed_to or 'not pushed (not blessed)'}")
    click.echo(f"MLflow run: {summary.mlflow_run_id} at {settings.mlflow_default_uri}")
    click.echo(f"  browse: mlflow ui --backend-store-uri {settings.mlflow_default_uri}")
