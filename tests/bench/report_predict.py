"""The results README's batch-scoring section (issue 30): ``torchtfx predict`` against a plain Python loop over
the SavedModel and against the champion's MLflow pyfunc (tests/bench/predict_bench.py)."""

from __future__ import annotations

_LABELS = {
    "torchtfx_predict": "`torchtfx predict` (Beam, checked input, atomic output)",
    "loop": "plain Python loop over the SavedModel (1,024-row batches)",
    "pyfunc": "MLflow pyfunc of the champion (whole CSV through pandas)",
}


def predict_section(r: dict) -> list[str]:
    warmup = r.get("warmup_seconds")
    lines = [
        "## Batch scoring: `torchtfx predict` (rows per second)",
        "",
        f"{r['rows']:,} taxi rows (the packaged CSV 10 times over), the same champion, each from reading the CSV to "
        "a written file of scores; "
        + (
            "one untimed round of every way first (imports, the first model load: "
            + ", ".join(f"{_SHORT.get(n, n)} {s:.1f} s" for n, s in warmup.items())
            + "), then the median of the interleaved rounds."
            if warmup
            else "median of the interleaved rounds."
        ),
        "",
        "| way | rows/s | seconds per round | ours against it |",
        "|---|---:|---|---:|",
    ]
    for name, rate in r["rows_per_second"].items():
        rounds = ", ".join(f"{s:.1f}" for s in r["seconds"][name])
        ratio = f"{r['ratio_to'][name]:.2f}x" if name in r["ratio_to"] else ""
        lines.append(f"| {_LABELS.get(name, name)} | {rate:,.0f} | {rounds} | {ratio} |")
    lines.append("")
    if "target_vs_loop" in r:
        ratio, target = r["ratio_to"]["loop"], r["target_vs_loop"]
        lines.append(f"Against the plain loop: {ratio:.2f}x (target ≥ {target}): {_verdict(ratio >= target)}.")
    scale = r.get("scale")
    if scale:
        met = scale["peak_pss_gib"] <= scale["target_pss_gib"]
        lines += [
            "",
            f"At {scale['rows']:,} rows (`torchtfx predict` as a command, the CSV repeated): "
            f"{scale['wall_seconds']:.0f} s, {scale['rows_per_second']:,.0f} rows/s; peak PSS of its process tree "
            f"{scale['peak_pss_gib']:.2f} GiB (RSS {scale['peak_rss_gib']:.2f} GiB, {scale['peak_processes']} "
            f"processes) (target ≤ {scale['target_pss_gib']} GiB): {_verdict(met)}.",
        ]
    return [*lines, ""]


_SHORT = {"torchtfx_predict": "ours", "loop": "loop", "pyfunc": "pyfunc"}


def _verdict(met: bool) -> str:
    return "met" if met else "**not met**"
