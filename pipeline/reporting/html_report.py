"""Per-run HTML report with PNG plots: candidate vs champion per metric and slice, calibration,
training curves (from MLflow), parity, and the promotion outcome."""

from __future__ import annotations

import html
import re
from pathlib import Path

from torchtfx.components.shared import contracts, evaluation_results
from torchtfx.components.shared.evaluation_results import BASELINE_MODEL_NAME, OVERALL_SLICE, MetricValues
from torchtfx.data.config import metrics
from torchtfx.pipeline.reporting.one_class import UNDEFINED, undefined_aucs
from torchtfx.pipeline.reporting.summary import RunSummary

REPORT_FILE = "report.html"
_LOSS_LABEL = {"binary": "binary cross-entropy", "multiclass": "cross-entropy", "regression": "regression loss"}


def report_dir(pipeline_root: Path, run_id: str) -> Path:
    return pipeline_root / "reports" / re.sub(r"[^0-9A-Za-z_.-]", "_", run_id)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _metrics_table(values: MetricValues) -> tuple[list[str], dict[tuple[str, str], dict[str, float]]]:
    """(slices, {(slice, metric): {"candidate": v, "champion": v}})."""
    table: dict[tuple[str, str], dict[str, float]] = {}
    slices: list[str] = []
    shown = set(metrics.reported_labels(m for _, m, _, _ in values))
    for (slice_, metric, model, is_diff), value in values.items():
        if is_diff or metric not in shown:
            continue
        role = "champion" if model == BASELINE_MODEL_NAME else "candidate"
        table.setdefault((slice_, metric), {})[role] = value
        if slice_ not in slices:
            slices.append(slice_)
    slices.sort(key=lambda s: (s != OVERALL_SLICE, [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]))
    return slices, table


def _plot_by_slice(slices, table, labels: tuple[str, ...], path: Path) -> None:
    """The task's headline metrics (metrics.EVALUATED: AUC; accuracy and macro AUC; MSE, MAE, RMSE) per slice,
    one panel each, candidate beside champion."""
    plt = _pyplot()
    labels = tuple(m for m in labels if (OVERALL_SLICE, m) in table)
    rows = max(len([s for s in slices if (s, m) in table][:30]) for m in labels)
    width = 10 if len(labels) == 1 else 5 * len(labels)
    fig, axes = plt.subplots(1, len(labels), figsize=(width, max(3, 0.3 * rows)), squeeze=False)
    for ax, metric in zip(axes[0], labels, strict=True):
        shown = [s for s in slices if (s, metric) in table][:30]
        ys = range(len(shown))
        cells = [table[(s, metric)] for s in shown]
        ax.barh([y + 0.2 for y in ys], [_bar(c, "candidate") for c in cells], 0.4, label="candidate")
        if any("champion" in c for c in cells):
            ax.barh([y - 0.2 for y in ys], [_bar(c, "champion") for c in cells], 0.4, label="champion")
        ax.set_yticks(list(ys), shown)
        ax.invert_yaxis()
        ax.set(xlabel=metric, title=f"{metric} per slice")
        if metrics.in_unit_interval(metric):
            ax.set_xlim(0, 1)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _bar(cell: dict[str, float], role: str) -> float:
    """A bar's length; none (NaN) for an AUC the slice leaves undefined (TFMA's 0.0 would read as a value)."""
    return float("nan") if UNDEFINED in cell else cell.get(role, 0)


def _reliability_bins(buckets, bins: int = 10) -> tuple[list[float], list[float]]:
    """TFMA's fine histogram (10,000 buckets) regrouped into ``bins`` equal-width bins."""
    sums = [[0.0, 0.0, 0.0] for _ in range(bins)]  # weight, label, prediction
    for b in buckets:
        if b.num_weighted_examples.value <= 0:
            continue
        i = min(bins - 1, max(0, int(b.lower_threshold_inclusive * bins)))
        sums[i][0] += b.num_weighted_examples.value
        sums[i][1] += b.total_weighted_label.value
        sums[i][2] += b.total_weighted_refined_prediction.value
    kept = [s for s in sums if s[0] > 0]
    return [s[2] / s[0] for s in kept], [s[1] / s[0] for s in kept]


def _plot_calibration(evaluation_uri: str, path: Path) -> bool:
    import tensorflow_model_analysis as tfma

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 5))
    drawn = False
    for plots in tfma.load_plots(evaluation_uri):
        if evaluation_results.slice_name(plots.slice_key) != OVERALL_SLICE:
            continue
        for kv in plots.plot_keys_and_values:
            pred, label = _reliability_bins(kv.value.calibration_histogram_buckets.buckets)
            if not pred:
                continue
            name = "champion" if kv.key.model_name == BASELINE_MODEL_NAME else "candidate"
            ax.plot(pred, label, marker="o", markersize=3, label=name)
            drawn = True
    if drawn:  # binary only: multiclass and regression evaluations have no calibration histogram
        ax.plot([0, 1], [0, 1], "k--", linewidth=1, label="perfect")
        ax.set(xlabel="mean predicted probability", ylabel="observed positive rate")
        ax.set_title("Calibration (eval, overall)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=90)
    plt.close(fig)
    return drawn


def _plot_losses(tracking_uri: str, run_id: str, path: Path, ylabel: str = "loss") -> bool:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    drawn = False
    for key in ("train_loss", "eval_loss"):
        history = sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)
        if history:
            ax.plot([m.step for m in history], [m.value for m in history], marker="o", label=key)
            drawn = True
    ax.set(xlabel="epoch", ylabel=ylabel, title="Training curves (MLflow)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return drawn


def _cell(cell: dict[str, float] | None, lower_is_better: bool = False) -> str:
    if not cell or "candidate" not in cell:
        return "<td></td>"
    if UNDEFINED in cell:  # one class in the slice: TFMA's 0.0 is no AUC
        return f"<td><small>{UNDEFINED}</small></td>"
    cand, champ = cell["candidate"], cell.get("champion")
    if champ is None or cand != cand or champ != champ:  # no champion, or NaN
        return f"<td>{cand:.4f}</td>"
    delta = cand - champ
    gain = -delta if lower_is_better else delta  # an error metric improves when it falls
    color = "#070" if gain > 1e-4 else "#a00" if gain < -1e-4 else "#555"
    return f"<td>{cand:.4f} <small style='color:{color}'>({delta:+.4f})</small></td>"


def _table_html(slices, table) -> str:
    """One row per slice; each cell is the candidate's value and its change vs the champion."""
    labels = metrics.reported_labels(m for _, m in table)
    head = "<tr><th>slice</th>" + "".join(f"<th>{m}</th>" for m in labels) + "</tr>"

    def row(slice_: str) -> str:
        cells = "".join(_cell(table.get((slice_, m)), metrics.lower_is_better(m)) for m in labels)
        return f"<tr><td>{html.escape(slice_)}</td>{cells}</tr>"

    rows = [row(slice_) for slice_ in slices]
    note = "<p><small>candidate value (change vs champion)</small></p>"
    return f"{note}<table>{head}{''.join(rows)}</table>"


def _headline(table: dict[tuple[str, str], dict[str, float]]) -> tuple[str, ...] | None:
    """The evaluated task's headline labels: the first task whose first headline label the overall slice has."""
    for evaluated in metrics.EVALUATED.values():
        if (OVERALL_SLICE, evaluated.headline[0]) in table:
            return evaluated.headline
    return None


def build_report(summary: RunSummary, pipeline_root: Path, tracking_uri: str) -> Path:
    """Write report.html and its PNGs for one run; returns the HTML path."""
    out = report_dir(pipeline_root, summary.run_id)
    out.mkdir(parents=True, exist_ok=True)
    sections = [f"<h1>torchtfx run {html.escape(summary.run_id)}</h1>", _outcome_html(summary)]
    evaluation = summary.output(contracts.EVALUATOR_ID, "evaluation")
    if evaluation is not None:
        values = evaluation_results.metric_values(evaluation.uri)
        slices, table = _metrics_table(values)
        for key in undefined_aucs(evaluation.uri, values) & table.keys():
            table[key][UNDEFINED] = float("nan")
        headline = _headline(table)
        if headline:
            # The file keeps its name for every task: links to it outlive a change of task.
            _plot_by_slice(slices, table, headline, out / "auc_by_slice.png")
            sections.append('<h2>Candidate vs champion</h2><img src="auc_by_slice.png">')
        sections.append(_table_html(slices, table))
        if _plot_calibration(evaluation.uri, out / "calibration.png"):
            sections.append('<h2>Calibration</h2><img src="calibration.png">')
        failures = evaluation_results.gate_failures(evaluation.uri)
        sections.append(f"<h2>Gates</h2><pre>{html.escape(evaluation_results.summary(failures))}</pre>")
    loss = _LOSS_LABEL.get(summary.task or "", "loss")
    if summary.mlflow_run_id and _plot_losses(tracking_uri, summary.mlflow_run_id, out / "loss_curves.png", loss):
        sections.append(f'<h2>Training</h2><p>MLflow run {summary.mlflow_run_id}</p><img src="loss_curves.png">')
    sections.append(
        "<h2>Parity</h2><p>max |SavedModel - PyTorch| over the eval split: "
        f"{'n/a' if summary.parity is None else f'{summary.parity:.3g}'}</p>"
    )
    if summary.refused_line:
        sections.append(f"<h2>Labels</h2><p>{html.escape(summary.refused_line)}</p>")
    if summary.precision_drift:
        sections.append(_precision_html(summary.precision_drift))
    stages = "".join(f"<tr><td>{s.node}</td><td>{s.state}</td><td>{s.seconds:.1f}</td></tr>" for s in summary.stages)
    sections.append(f"<h2>Stages</h2><table><tr><th>component</th><th>state</th><th>s</th></tr>{stages}</table>")
    style = "body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}"
    path = out / REPORT_FILE
    path.write_text(
        f"<html><head><meta charset='utf-8'><style>{style}</style></head><body>{''.join(sections)}</body></html>"
    )
    return path


def _precision_html(outcome: dict) -> str:
    """The drift gate's verdict on the reduced-precision variant, with every figure it measured."""
    drift = outcome.get("drift") or {}
    rows = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>"
        for k, v in sorted(drift.items())
        if k not in ("limits", "violations")
    )
    limits = html.escape(str(drift.get("limits", {})))
    return (
        f"<h2>Serving precision</h2><p>served <b>{html.escape(outcome['served'])}</b> (asked for "
        f"{html.escape(outcome['requested'])}): {html.escape(outcome['reason'])}</p>"
        f"<table>{rows}</table><p><small>limits: {limits}</small></p>"
    )


def _outcome_html(summary: RunSummary) -> str:
    if summary.pushed_to:
        return f"<p><b>Promoted</b>: champion is now served from {html.escape(summary.pushed_to)}</p>"
    if summary.unchanged:
        verdict = "Rejected, and nothing to record" if summary.blessed is False else "Nothing to promote"
        return f"<p><b>{verdict}</b>: {html.escape(summary.unchanged)}</p>"
    if summary.blessed is False:
        return "<p><b>Rejected</b>: the champion and the serving directory are unchanged.</p>"
    return "<p>The run did not reach promotion.</p>"
