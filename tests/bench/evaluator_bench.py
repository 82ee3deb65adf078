"""What the Evaluator's work costs, metric by metric and with our slices, against the reference's EvalConfig.

TFX's taxi example evaluates one metric (BinaryAccuracy) on the overall slice; ours evaluates every metric
the gates and the report use, on the overall slice and the dataset's slices. Each variant below is one
``tfma.run_model_analysis`` of our pushed SavedModel on the same raw eval split, in this process (the model
loaded and TF warm for every variant alike), in rounds that take turns so that a busy spell on the shared
machine lands on every variant:

- ``reference``: the reference's metric, overall slice;
- ``ours_overall``: our metrics, overall slice (equal slices with the reference);
- ``ours``: our metrics and our slices (what the pipeline's Evaluator computes);
- ``+<Metric>``: the reference's config plus one of our metrics: that metric's own cost.
"""

from __future__ import annotations

import logging
import statistics
import tempfile
import time
from pathlib import Path

logger = logging.getLogger(__name__)

REFERENCE_METRIC = "BinaryAccuracy"
ROUNDS = 3


def _variants(dataset) -> dict[str, tuple[list, list]]:
    """name -> (metric configs without thresholds, slicing specs)."""
    import tensorflow_model_analysis as tfma

    from torchtfx.pipeline.evaluation.config import OVERALL, build_eval_config

    ours = build_eval_config(dataset, dataset.gates)
    metrics = []
    for spec in ours.metrics_specs:
        for metric in spec.metrics:
            plain = tfma.MetricConfig(class_name=metric.class_name, config=metric.config, module=metric.module)
            if plain.class_name not in {m.class_name for m in metrics}:
                metrics.append(plain)
    reference = [tfma.MetricConfig(class_name=REFERENCE_METRIC)]
    variants = {
        "reference": (reference, [OVERALL]),
        "ours_overall": (metrics, [OVERALL]),
        "ours": (metrics, list(ours.slicing_specs)),
    }
    for metric in metrics:
        if metric.class_name != REFERENCE_METRIC:
            variants[f"+{metric.class_name}"] = ([*reference, metric], [OVERALL])
    return variants


def _run(model_dir: Path, examples_dir: Path, model_spec, metrics: list, slices: list, out_dir: Path) -> float:
    import tensorflow_model_analysis as tfma

    eval_config = tfma.EvalConfig(
        model_specs=[model_spec], slicing_specs=slices, metrics_specs=[tfma.MetricsSpec(metrics=metrics)]
    )
    shared = tfma.default_eval_shared_model(eval_saved_model_path=str(model_dir), eval_config=eval_config)
    started = time.perf_counter()
    tfma.run_model_analysis(
        eval_shared_model=shared,
        eval_config=eval_config,
        data_location=str(examples_dir / "*.gz"),
        file_format="tfrecords",
        output_path=str(out_dir),
    )
    return time.perf_counter() - started


def evaluator_costs(model_dir: Path, examples_dir: Path, dataset, work: Path) -> dict:
    """Median seconds per variant over ``ROUNDS`` interleaved rounds, and each against ``reference``."""
    from tests.bench.scoring import our_model_spec

    variants = _variants(dataset)
    model_spec = our_model_spec(dataset)
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    work.mkdir(parents=True, exist_ok=True)
    _run(model_dir, examples_dir, model_spec, *variants["reference"], Path(tempfile.mkdtemp(dir=work)))  # warm-up
    for round_ in range(ROUNDS):
        for name, (metrics, slices) in variants.items():
            seconds[name].append(
                _run(model_dir, examples_dir, model_spec, metrics, slices, Path(tempfile.mkdtemp(dir=work)))
            )
            logger.info("evaluator round %s %s: %.2f s", round_ + 1, name, seconds[name][-1])
    median = {name: statistics.median(times) for name, times in seconds.items()}
    base = median["reference"]
    return {
        "seconds": median,
        "rounds": seconds,
        "ratio_to_reference": {name: value / base for name, value in median.items()},
        "extra_seconds": {name: value - base for name, value in median.items() if name.startswith("+")},
        "slices": [", ".join(s.feature_keys) or "Overall" for s in variants["ours"][1]],
        "target_ratio_equal_slices": 1.2,
    }


def report_lines(r: dict) -> list[str]:
    seconds, ratio = r["seconds"], r["ratio_to_reference"]
    lines = [
        "## 7. Evaluator: what each metric and our slices cost",
        "",
        "`tfma.run_model_analysis` of our taxi SavedModel on the eval split, in one process, median of "
        f"{len(next(iter(r['rounds'].values())))} interleaved rounds. `reference`: TFX taxi's EvalConfig "
        "(BinaryAccuracy, overall slice); `+Metric`: that config plus one of ours.",
        "",
        "| variant | seconds | x reference |",
        "|---|---:|---:|",
    ]
    order = ["reference", "ours_overall", "ours", *sorted(n for n in seconds if n.startswith("+"))]
    lines += [f"| {name} | {seconds[name]:.2f} | {ratio[name]:.2f} |" for name in order if name in seconds]
    equal = ratio["ours_overall"]
    met = "met" if equal <= r["target_ratio_equal_slices"] else "**not met**"
    lines += [
        "",
        f"At equal slices (overall only) ours takes {equal:.2f}x the reference's (target ≤ "
        f"{r['target_ratio_equal_slices']}): {met}. Our slices: {', '.join(r['slices'])}.",
        "",
    ]
    return lines
