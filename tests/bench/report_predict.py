"""The results README's batch-scoring section (issue 30): ``torchtfx predict`` against a plain Python loop over
the SavedModel and against the champion's MLflow pyfunc (tests/bench/predict_bench.py)."""

from __future__ import annotations

_LABELS = {
    "torchtfx_predict": "`torchtfx predict` (Beam, checked input, atomic output)",
    "loop": "plain Python loop over the SavedModel (1,024-row batches)",
    "pyfunc": "MLflow pyfunc of the champion (whole CSV through pandas)",
}


def predict_section(r: dict) -> list[str]:
    lines = [
        "## Batch scoring: `torchtfx predict` (rows per second)",
        "",
        f"{r['rows']:,} taxi rows (the packaged CSV 10 times over), the same champion, each from reading the CSV to "
        "a written file of scores; median of the interleaved rounds.",
        "",
        "| way | rows/s | seconds per round | ours against it |",
        "|---|---:|---|---:|",
    ]
    for name, rate in r["rows_per_second"].items():
        rounds = ", ".join(f"{s:.1f}" for s in r["seconds"][name])
        ratio = f"{r['ratio_to'][name]:.2f}x" if name in r["ratio_to"] else ""
        lines.append(f"| {_LABELS.get(name, name)} | {rate:,.0f} | {rounds} | {ratio} |")
    return [*lines, ""]
