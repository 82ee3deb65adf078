"""The end-of-run report printed by ``torchtfx run``."""

from __future__ import annotations

import re
import textwrap

import click

from torchtfx.components.shared import contracts, evaluation_results
from torchtfx.data.config.metrics import reported_labels
from torchtfx.pipeline.reporting.html_report import build_report
from torchtfx.pipeline.reporting.summary import RunSummary


def print_run_report(summary: RunSummary, wall: float, settings) -> bool:
    """Print the run's outcome; returns False when the candidate was rejected by a gate (also when it is
    identical to a model the registry has: a champion that fails today's gates is still a failed gate)."""
    click.echo("")
    click.echo(f"Pipeline run {summary.run_id} finished in {wall:.1f} s")
    for stage in summary.stages:
        click.echo(f"  {stage.node:<20} {stage.state:<9} {stage.seconds:7.1f} s")
    evaluation = summary.output(contracts.EVALUATOR_ID, "evaluation")
    failures = []
    if evaluation is not None:
        metrics = evaluation_results.candidate_metrics(evaluation.uri)
        for line in evaluation_lines(metrics.get(evaluation_results.OVERALL_SLICE, {})):
            click.echo(line)
        click.echo(f"  slices evaluated: {len(metrics)}; full results: {evaluation.uri}")
        failures = evaluation_results.gate_failures(evaluation.uri)
    parity = "n/a" if summary.parity is None else f"{summary.parity:.3g}"
    click.echo(f"Parity (max |SavedModel - PyTorch| on eval): {parity}")
    workers = summary.ddp_workers
    click.echo(f"Training workers: {workers}" + (" (DDP)" if workers and workers > 1 else ""))
    refused = summary.refused_line
    if refused:
        click.echo(refused)
    precision = precision_line(summary)
    if precision:
        click.echo(precision)
    click.echo(f"MLflow run: {summary.mlflow_run_id} at {settings.mlflow_default_uri}")
    click.echo(f"  browse: mlflow ui --backend-store-uri {settings.mlflow_default_uri}")
    click.echo(f"Report: {build_report(summary, settings.root, settings.mlflow_default_uri)}")
    if summary.pushed_to:
        click.echo(f"Promoted to champion; pushed model: {summary.pushed_to}")
        _pending_note(summary)
        return True
    if summary.unchanged:
        # A rerun on unchanged data and code: nothing was pushed or registered, and that is a success unless the
        # gates failed (the champion itself fails them, or the rejection was already recorded).
        click.echo(f"Nothing to promote. {summary.unchanged}")
        _pending_note(summary)
        if not failures and summary.blessed is not False:
            return True
    click.echo(evaluation_results.summary(failures), err=True)
    return False


# The console report's lines stay under this width: a multiclass evaluation was one line of 643 characters.
LINE_WIDTH = 119
_PER_CLASS = re.compile(r"^(?P<name>\w+)\[class_id=(?P<k>\d+)\]$")


def _wrapped(items: list[str], first: str, indent: str) -> list[str]:
    text = ", ".join(items)
    return textwrap.wrap(
        text, LINE_WIDTH, initial_indent=first, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )


def evaluation_lines(overall: dict[str, float]) -> list[str]:
    """The candidate's overall metrics, wrapped under ``LINE_WIDTH``: the task's metrics, then one line (or more)
    per per-class metric, ``recall per class: 0=0.9000, 1=0.7000, ...``."""
    scalars, per_class = [], {}
    for label in reported_labels(overall):
        found = _PER_CLASS.match(label)
        if found:
            per_class.setdefault(found["name"], []).append(f"{found['k']}={overall[label]:.4f}")
        else:
            scalars.append(f"{label}={overall[label]:.4f}")
    lines = _wrapped(scalars, "Evaluation (eval split, overall, candidate): ", "  ") or ["Evaluation: no metrics"]
    for name, values in per_class.items():
        lines += _wrapped(values, f"  {name} per class: ", "    ")
    return lines


def _pending_note(summary: RunSummary) -> None:
    if summary.labels_pending:
        click.echo(
            "TF Serving: the version is staged in models.config; the stable/canary labels move onto it once "
            "you confirm the server has it AVAILABLE: `torchtfx promote --finish` (no new promotion starts before "
            "that; `--rollback` undoes it), or give --serving-address to have the load confirmed and the labels "
            "moved in the same run."
        )


def precision_line(summary: RunSummary) -> str | None:
    """What the drift gate decided about a reduced-precision variant (None when none was asked for)."""
    outcome = summary.precision_drift
    if not outcome:
        return None
    served, requested = outcome["served"], outcome["requested"]
    drift = outcome.get("drift") or {}
    figures = f"max |Δ| {drift['max_abs_diff']:.3g}, mean {drift['mean_abs_diff']:.3g}; " if drift else ""
    return f"Serving precision: {served} (asked for {requested}; {figures}{outcome['reason']})"
