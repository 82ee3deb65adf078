"""The whole pipeline on synthetic taxi-like data (same schema as taxi) at several sizes."""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from bench.pipelines import evaluator_metrics, run_ours

logger = logging.getLogger(__name__)

PSS_TARGET_GIB = 4.0  # issue #17: peak PSS (shared library pages counted once), not summed RSS
TIME_RATIO_TARGET = 5.5


def _generate(rows: int, out_dir: Path, seed: int) -> float:
    from torchtfx.data.synthetic_taxi import write_csv

    if out_dir.exists():
        shutil.rmtree(out_dir)
    tick = time.perf_counter()
    write_csv(out_dir, rows, seed=seed)
    return time.perf_counter() - tick


def scale(sizes: list[int], work: Path, beam_workers: int, seed: int = 7, keep_data: bool = False) -> dict:
    runs = []
    for rows in sizes:
        data_dir = work / f"data_{rows}"
        generate_seconds = _generate(rows, data_dir, seed)
        root = work / f"ours_{rows}"
        shutil.rmtree(root, ignore_errors=True)  # a cold root: MLMD caching would otherwise reuse the last run
        run = run_ours(root, data_dir, "taxi", beam_workers)
        metrics = evaluator_metrics(root)
        runs.append(
            {
                "rows": rows,
                "generate_seconds": generate_seconds,
                **run.to_dict(),
                "auc": metrics.get("auc"),
                "eval_examples": metrics.get("example_count"),
            }
        )
        logger.info("scale %s rows: %.1f s, peak RSS %.2f GiB", rows, run.wall_seconds, run.peak_rss_gib)
        if not keep_data:
            shutil.rmtree(data_dir)
    result: dict = {"runs": runs, "pss_target_gib": PSS_TARGET_GIB, "time_ratio_target": TIME_RATIO_TARGET}
    if len(runs) >= 2:
        small, large = runs[0], runs[-1]
        result["time_ratio"] = large["wall_seconds"] / small["wall_seconds"]
        result["rows_ratio"] = large["rows"] / small["rows"]
    return result
