"""Ours against TFX's native-Keras taxi pipeline on synthetic taxi rows (taxi schema), size by size.

For each size the rows are generated once; then the reference runs, then ours, each from a cold pipeline root,
with the same Beam args, on the same machine. Wall time, stage times (ML Metadata) and peak PSS of both; AUC
from our Evaluator's output and, for the reference, from its trained model on its own eval split (its Evaluator
computes no AUC: ``pipelines.reference_metrics``).
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from tests.bench import pipelines
from torchtfx.data.config.dataset import DatasetConfig, load_dataset_config
from torchtfx.pipeline.local.runner import LocalSettings

logger = logging.getLogger(__name__)

# Issue #45 (#29 before it). At ``rows``: our wall ≤ 0.65x the reference's, our peak PSS ≤ 1x, our AUC ≥ the
# reference's - 0.005. At ``large_rows``: our peak PSS ≤ 3.5 GiB (PSS: shared library pages counted once, not
# summed RSS) and our wall at large_rows / at rows ≤ 5.5 (#29's).
TARGETS = {
    "rows": 1_000_000,
    "wall_ratio": 0.65,
    "pss_ratio": 1.0,
    "auc_delta_min": -0.005,
    "large_rows": 5_000_000,
    "pss_gib_5m": 3.5,
    "time_ratio_5m_1m": 5.5,
}


def _generate(rows: int, out_dir: Path, seed: int) -> float:
    from torchtfx.data.synthetic_taxi import write_csv

    if out_dir.exists():
        shutil.rmtree(out_dir)
    tick = time.perf_counter()
    write_csv(out_dir, rows, seed=seed)
    return time.perf_counter() - tick


def shared_beam_args(dataset: DatasetConfig, data_dir: Path, our_root: Path, beam_workers: int) -> list[str]:
    """The Beam args both pipelines get, sized for the CSV files in ``data_dir`` (above 32 MiB:
    multi_processing with ``beam_workers`` processes).

    ``torchtfx run --data-dir D --beam-workers N`` builds the same LocalSettings (beam_mode auto) and calls the
    same ``beam_args()``; none of its other flags enter the args, so the two are equal. Checked here with the
    settings our run gets, the mode pinned by ``--beam-mode`` (``our_run_flags``) so that a change to the auto
    rule cannot make them differ unnoticed.
    """
    args = pipelines.beam_args(beam_workers, dataset, our_root, data_dir)
    mode = pipelines.beam_flag(args, "--direct_running_mode")
    ours = LocalSettings(
        dataset=dataset, pipeline_root=our_root, data_dir=data_dir, beam_workers=beam_workers, beam_mode=mode
    ).beam_args()
    if ours != args:
        raise RuntimeError(f"torchtfx run would get Beam args {ours}, the reference {args}")
    return args


def our_run_flags(args: list[str]) -> list[str]:
    return ["--beam-mode", pipelines.beam_flag(args, "--direct_running_mode")]


def _our_metrics(root: Path) -> dict:
    metrics = pipelines.evaluator_metrics(root)
    count = metrics.get("example_count")  # TFMA writes counts as doubles
    return {
        "auc": metrics.get("auc"),
        "eval_examples": None if count is None else int(count),
        "evaluator_metrics": metrics,
    }


def comparison(ours: dict, reference: dict) -> dict:
    """Our figures over (or minus) the reference's; none where the reference did not finish."""
    auc, ref_auc = ours.get("auc"), reference.get("auc")
    if reference.get("returncode", 0) != 0:
        return {"wall_ratio": None, "pss_ratio": None, "auc_delta": None, "eval_examples_equal": None}
    return {
        "wall_ratio": ours["wall_seconds"] / reference["wall_seconds"],
        "pss_ratio": ours["peak_pss_gib"] / reference["peak_pss_gib"],
        "auc_delta": None if auc is None or ref_auc is None else auc - ref_auc,
        "eval_examples_equal": ours.get("eval_examples") == reference.get("eval_examples"),
    }


def one_size(rows: int, work: Path, beam_workers: int, dataset: DatasetConfig, seed: int, keep_data: bool) -> dict:
    data_dir, ours_root, ref_root = work / f"data_{rows}", work / f"ours_{rows}", work / f"reference_{rows}"
    generate_seconds = _generate(rows, data_dir, seed)
    for root in (ref_root, ours_root):
        shutil.rmtree(root, ignore_errors=True)  # cold roots: MLMD caching would otherwise reuse the last run
    args = shared_beam_args(dataset, data_dir, ours_root, beam_workers)
    logger.info("scale %s rows: Beam args for both pipelines %s", f"{rows:,}", args)
    # Above the targets' size the reference may run out of memory: then its stopping stage is reported.
    reference = pipelines.run_reference(ref_root, data_dir, args, may_fail=rows > TARGETS["rows"])
    ours = pipelines.run_ours(ours_root, data_dir, "taxi", beam_workers, extra=our_run_flags(args))
    size = {
        "rows": rows,
        "data_bytes": sum(p.stat().st_size for p in data_dir.glob("*.csv")),
        "generate_seconds": generate_seconds,
        "beam_args": args,
        "our_run_flags": our_run_flags(args),
        "reference": {
            **reference.to_dict(),
            **(pipelines.reference_metrics(ref_root) if reference.returncode == 0 else {}),
        },
        "ours": {**ours.to_dict(), **_our_metrics(ours_root)},
    }
    size.update(comparison(size["ours"], size["reference"]))
    log_size(size)
    if not keep_data:
        shutil.rmtree(data_dir)
    return size


def _auc(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def log_size(size: dict) -> None:
    ours, ref = size["ours"], size["reference"]
    delta = size["auc_delta"]
    logger.info(
        "scale %s rows: wall torchtfx %.1f s, reference %.1f s%s (ratio %s, target ≤ %s); peak PSS %.2f / %.2f GiB "
        "(ratio %s, target ≤ %s); AUC %s / %s (ours - reference %s, target ≥ %s); eval examples %s / %s",
        f"{size['rows']:,}",
        ours["wall_seconds"],
        ref["wall_seconds"],
        f" (stopped in {ref['stopped_in']}, exit code {ref['returncode']})" if ref.get("returncode") else "",
        _ratio(size["wall_ratio"]),
        TARGETS["wall_ratio"],
        ours["peak_pss_gib"],
        ref["peak_pss_gib"],
        _ratio(size["pss_ratio"]),
        TARGETS["pss_ratio"],
        _auc(ours["auc"]),
        _auc(ref.get("auc")),
        "n/a" if delta is None else f"{delta:+.4f}",
        TARGETS["auc_delta_min"],
        ours["eval_examples"],
        ref.get("eval_examples"),
    )
    for name, run in (("torchtfx", ours), ("reference", ref)):
        logger.info("scale %s rows, %s stages (s): %s", f"{size['rows']:,}", name, run["stages"])


def time_ratios(sizes: list[dict]) -> dict:
    """Wall at the largest size over wall at the smallest, ours and the reference's (two sizes or more)."""
    if len(sizes) < 2:
        return {}
    small, large = min(sizes, key=lambda s: s["rows"]), max(sizes, key=lambda s: s["rows"])
    finished = all(size["reference"].get("returncode", 0) == 0 for size in (small, large))
    return {
        "time_ratio": large["ours"]["wall_seconds"] / small["ours"]["wall_seconds"],
        "reference_time_ratio": (
            large["reference"]["wall_seconds"] / small["reference"]["wall_seconds"] if finished else None
        ),
        "time_ratio_rows": [small["rows"], large["rows"]],
        "rows_ratio": large["rows"] / small["rows"],
    }


def scale(sizes: list[int], work: Path, beam_workers: int, seed: int = 7, keep_data: bool = False) -> dict:
    dataset = load_dataset_config("taxi")
    done = [one_size(rows, work, beam_workers, dataset, seed, keep_data) for rows in sizes]
    result = {"sizes": done, "targets": dict(TARGETS), **time_ratios(done)}
    if "time_ratio" in result:
        logger.info(
            "scale: wall at %s rows / at %s rows: torchtfx %.2f, reference %s",
            *(f"{r:,}" for r in result["time_ratio_rows"][::-1]),
            result["time_ratio"],
            _ratio(result["reference_time_ratio"]),
        )
    return result
