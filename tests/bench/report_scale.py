"""Section 5 of ``tests/bench/results/README.md`` and ``scale_stages.png``: ours against TFX's taxi pipeline on
synthetic taxi rows (``tests/bench/results/scale.json``, written by ``tests.bench.scale_bench.scale``)."""

from __future__ import annotations

from pathlib import Path

from tests.bench.report_parts import STAGE_ROLES, met, process_label, role_seconds

PLOT = "scale_stages.png"


def is_current(r: dict) -> bool:
    """Written by the side-by-side benchmark (before it, scale.json held only our runs under ``runs``)."""
    return "sizes" in r and "targets" in r


def _num(value: float | None, spec: str = ".4f") -> str:
    return "n/a" if value is None else format(value, spec)


def _count(value: float | None) -> str:
    return "n/a" if value is None else f"{int(value):,}"


def _stage_table(ours: dict, ref: dict) -> list[str]:
    lines = ["| stage | torchtfx (s) | reference (s) |", "|---|---:|---:|"]
    for role, our_ids, ref_ids in STAGE_ROLES:
        lines.append(
            f"| {role} | {role_seconds(ours['stages'], our_ids):.1f} | {role_seconds(ref['stages'], ref_ids):.1f} |"
        )
    accuracy = [run.get("evaluator_metrics", {}).get("binary_accuracy") for run in (ours, ref)]
    ref_wall = f"**{ref['wall_seconds']:.1f}**" + (f" (stopped in {ref['stopped_in']})" if _failed(ref) else "")
    return [
        *lines,
        f"| **wall (whole command)** | **{ours['wall_seconds']:.1f}** | {ref_wall} |",
        f"| peak PSS, process tree (GiB) | {ours['peak_pss_gib']:.2f} | {ref['peak_pss_gib']:.2f} |",
        f"| peak RSS, process tree (GiB) | {ours['peak_rss_gib']:.2f} | {ref['peak_rss_gib']:.2f} |",
        f"| AUC | {_num(ours.get('auc'))} | {_num(ref.get('auc'))} |",
        f"| binary accuracy (each Evaluator's own) | {_num(accuracy[0])} | {_num(accuracy[1])} |",
        f"| eval examples | {_count(ours.get('eval_examples'))} | {_count(ref.get('eval_examples'))} |",
    ]


def _failed(run: dict) -> bool:
    return run.get("returncode", 0) != 0


def _verdict(ok: bool, judged: bool) -> str:
    return met(ok) if judged else "for comparison"


def _target_line(size: dict, t: dict) -> str:
    judged = size["rows"] == t["rows"]  # the targets are set at 1M rows; other sizes are shown for comparison
    ref = size["reference"]
    if _failed(ref):
        return (
            f"The reference did not finish: it stopped in {ref['stopped_in']} after {ref['wall_seconds']:.0f} s "
            f"(exit code {ref['returncode']}; its peak PSS {ref['peak_pss_gib']:.2f} GiB, RSS "
            f"{ref['peak_rss_gib']:.2f} GiB), so there is no ratio at this size; its finished stages are in the table."
        )
    delta = size.get("auc_delta")
    auc_part = (
        "AUC n/a"
        if delta is None
        else (
            f"AUC ours - reference {delta:+.4f} (target ≥ {t['auc_delta_min']}): "
            f"{_verdict(delta >= t['auc_delta_min'], judged)}"
        )
    )
    return (
        f"Wall ratio {size['wall_ratio']:.2f} (target ≤ {t['wall_ratio']}): "
        f"{_verdict(size['wall_ratio'] <= t['wall_ratio'], judged)}; peak PSS ratio {size['pss_ratio']:.2f} (target "
        f"≤ {t['pss_ratio']}): {_verdict(size['pss_ratio'] <= t['pss_ratio'], judged)}; {auc_part}."
    )


def peak_processes(run: dict) -> str:
    by_process = sorted(run.get("peak_rss_mib_by_process", {}).items(), key=lambda kv: -kv[1])
    return ", ".join(f"{process_label(name)} {mib}" for name, mib in by_process if mib >= 64) or "n/a"


def _size_lines(size: dict, t: dict) -> list[str]:
    ours, ref = size["ours"], size["reference"]
    same = "equal" if size.get("eval_examples_equal") else "**not equal**: the splits differ"
    if _failed(ref):
        same = "not compared (the reference did not finish)"
    return [
        f"### {size['rows']:,} rows",
        "",
        f"{size.get('data_bytes', 0) / 2**20:,.0f} MiB of CSV, generated in {size['generate_seconds']:.1f} s; Beam "
        f"args of both: `{' '.join(size['beam_args'])}`.",
        "",
        *_stage_table(ours, ref),
        "",
        _target_line(size, t),
        f"Eval example counts {same}."
        + (
            ""
            if _failed(ref)
            else f" The reference's AUC: its model scored on its eval split in "
            f"{ref.get('auc_seconds', 0.0):.1f} s, outside the measured runs."
        ),
        f"Processes at the peak (MiB of RSS): torchtfx {peak_processes(ours)}; reference {peak_processes(ref)}.",
        "",
    ]


def _large_lines(r: dict) -> list[str]:
    """Our peak PSS at the largest size and the time ratio across sizes, judged where 5M and 1M rows ran."""
    t, sizes = r["targets"], r["sizes"]
    largest = max(sizes, key=lambda s: s["rows"])
    pss = largest["ours"]["peak_pss_gib"]
    judged = largest["rows"] == t["large_rows"]
    lines = [
        f"Our peak PSS at {largest['rows']:,} rows {pss:.2f} GiB (target ≤ {t['pss_gib_5m']} at "
        f"{t['large_rows']:,} rows): {_verdict(pss <= t['pss_gib_5m'], judged)}."
    ]
    if "time_ratio" in r:
        small, large = r["time_ratio_rows"]
        judged = (small, large) == (t["rows"], t["large_rows"])
        lines.append(
            f"Wall at {large:,} rows / at {small:,} rows: torchtfx {r['time_ratio']:.2f} (target ≤ "
            f"{t['time_ratio_5m_1m']} for {t['large_rows']:,} / {t['rows']:,}): "
            f"{_verdict(r['time_ratio'] <= t['time_ratio_5m_1m'], judged)}; reference "
            + ("n/a (it did not finish)." if r["reference_time_ratio"] is None else f"{r['reference_time_ratio']:.2f}.")
        )
    return lines


def scale_section(r: dict) -> list[str]:
    t = r["targets"]
    lines = [
        f"## 5. Scale: against the reference at {t['rows']:,} rows (synthetic taxi rows)",
        "",
        "TFX's native-Keras taxi pipeline, then ours, on the same generated rows (`torchtfx.data.synthetic_taxi`, "
        "taxi schema), each from a cold pipeline root, the same Beam args, on this machine. Stage times from ML "
        "Metadata; peak PSS summed over the process tree (shared pages split among the processes that map them). "
        "AUC: ours from our Evaluator's output; the reference's Evaluator computes BinaryAccuracy alone, so its "
        "model is scored on its own eval split with our Evaluator's AUC thresholds.",
        "",
    ]
    for size in sorted(r["sizes"], key=lambda s: s["rows"]):
        lines += _size_lines(size, t)
    return [*lines, *_large_lines(r), "", f"![scale stages]({PLOT})", ""]


def scale_plot(r: dict, out: Path) -> None:
    """Stage times by role, ours beside the reference's, at the largest size."""
    import matplotlib.pyplot as plt

    size = max(r["sizes"], key=lambda s: s["rows"])
    ours, ref = size["ours"], size["reference"]
    roles = [role for role, _, _ in STAGE_ROLES]
    y = range(len(roles))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.barh(
        [i + 0.2 for i in y],
        [role_seconds(ours["stages"], ids) for _, ids, _ in STAGE_ROLES],
        0.4,
        label=f"torchtfx ({ours['wall_seconds']:.0f} s wall)",
    )
    ax.barh(
        [i - 0.2 for i in y],
        [role_seconds(ref["stages"], ids) for _, _, ids in STAGE_ROLES],
        0.4,
        label=f"TFX taxi native Keras ({ref['wall_seconds']:.0f} s wall)",
    )
    ax.set_yticks(list(y), roles)
    ax.invert_yaxis()
    ax.set_xlabel("seconds (ML Metadata execution time)")
    ax.set_title(f"Stage times at {size['rows']:,} synthetic taxi rows")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / PLOT, dpi=110)
    plt.close(fig)
