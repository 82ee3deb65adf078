"""``python -m tests.bench`` (``make bench``): the five benchmarks, each a ratio against a reference run in
the same command, ``zoo`` (every zoo model through the pipeline: conversion, parity, latency, AUC; then the
research corpus of tests/bench/research_zoo/ on a taxi sample, ``--zoo-set``), ``serving_text`` (a text model's
serving latency at batch 1, 32, 256 and two token lengths, ``tests/bench/sequence_serving_bench.py``),
``pretrained_finetune`` (MiniLM fine-tuned against text_transformer on the same split, ``--pretrained-full`` adds every
row; ``tests/bench/pretrained_finetune_bench.py``) and ``serving_pretrained`` (its served signature against
``tokenizers`` + onnxruntime and + PyTorch eager, ``tests/bench/pretrained_serving_bench.py``).
``scale`` runs TFX's taxi pipeline beside ours on synthetic taxi rows, 1M by default (``--scale-rows 1000000
5000000`` adds 5M rows; ``tests/bench/scale_bench.py``).
Results go to ``tests/bench/results/<name>.json`` (the corpus: ``research_zoo.json``); ``tests/bench/results/README.md``
and the plots are rebuilt from every JSON file there."""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import time
from pathlib import Path

BENCHMARKS = (
    "reference",
    "serving",
    "scale",
    "input_path",
    "ddp",
    "zoo",
    "evaluator",
    "serving_text",
    "predict",
    "pretrained_finetune",  # before serving_pretrained, which times the model of its sampled MiniLM run
    "serving_pretrained",
)
RESULTS = Path(__file__).parent / "results"
TAXI_ROUNDS = 3  # issue #45: the taxi ratios are medians over interleaved rounds


def _write(name: str, payload: dict, out: Path) -> None:
    payload = {
        "benchmark": name,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        **payload,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(payload, indent=2, sort_keys=True, default=float))
    logging.getLogger("bench").info("wrote %s", out / f"{name}.json")


def _recorded(name: str, out: Path) -> dict | None:
    """The last result ``_write`` wrote for ``name`` under ``out``, if any."""
    path = out / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _reference(work: Path, beam_workers: int, reuse_runs: bool) -> dict:
    from tests.bench import pipelines, scoring
    from torchtfx.data.config.dataset import load_dataset_config
    from torchtfx.data.csv_reader.sources import default_data_dir

    dataset = load_dataset_config("taxi")
    data_dir = default_data_dir(dataset)
    args = pipelines.beam_args(beam_workers, dataset, work)
    runs_file = work / "reference_runs.json"
    if reuse_runs and runs_file.exists():  # re-score the last runs without running them again
        saved = json.loads(runs_file.read_text())
        saved = [saved] if isinstance(saved[0], dict) else saved  # one (reference, ours) pair before issue #45
        rounds = [tuple(pipelines.PipelineRun.from_dict(run) for run in pair) for pair in saved]
    else:
        rounds = []
        for _ in range(TAXI_ROUNDS):  # reference, ours, reference, ours, ...: each from cold pipeline roots
            for name in ("reference", "ours"):
                shutil.rmtree(work / name, ignore_errors=True)
            reference = pipelines.run_reference(work / "reference", data_dir, args)
            rounds.append((reference, pipelines.run_ours(work / "ours", data_dir, "taxi", beam_workers)))
        runs_file.write_text(json.dumps([[run.to_dict() for run in pair] for pair in rounds]))
    reference, ours = rounds[-1]  # the roots left: scored here; the serving and predict benches read ours
    eval_dir = pipelines.eval_examples_dir(work / "ours")
    ours_metrics = scoring.tfma_metrics(
        pipelines.only_subdir(work / "ours" / "serving" / "taxi"),
        eval_dir,
        scoring.our_model_spec(dataset),
        dataset,
        work / "tfma_ours",
    )
    reference_spec = scoring.reference_model_spec(pipelines.REFERENCE_LABEL_KEY, pipelines.REFERENCE_PREPROCESSING)
    reference_metrics = scoring.tfma_metrics(
        pipelines.only_subdir(work / "reference" / "serving"), eval_dir, reference_spec, dataset, work / "tfma_ref"
    )
    return {
        "beam_args": args,
        "reference": {**reference.to_dict(), "metrics": reference_metrics},
        "ours": {**ours.to_dict(), "metrics": ours_metrics},
        **pipelines.round_ratios(rounds),
        "target_wall_ratio": 0.45,  # issue #45 (#29: 0.65)
        "target_auc": 0.935,
        "target_pss_ratio": 1.0,  # issue #45 (#29: 1.5)
    }


def _our_taxi_run(work: Path, beam_workers: int) -> Path:
    """The reference benchmark's run of our pipeline; run here when absent (`--only serving` on a fresh clone)."""
    from tests.bench import pipelines
    from torchtfx.data.config.dataset import load_dataset_config
    from torchtfx.data.csv_reader.sources import default_data_dir

    root = work / "ours"
    if not (root / "serving" / "taxi").is_dir():
        shutil.rmtree(root, ignore_errors=True)
        pipelines.run_ours(root, default_data_dir(load_dataset_config("taxi")), "taxi", beam_workers)
    return root


def _evaluator(work: Path, beam_workers: int) -> dict:
    from tests.bench import pipelines
    from tests.bench.evaluator_bench import evaluator_costs
    from torchtfx.data.config.dataset import load_dataset_config

    root = _our_taxi_run(work, beam_workers)
    model_dir = pipelines.only_subdir(root / "serving" / "taxi")
    return evaluator_costs(model_dir, pipelines.eval_examples_dir(root), load_dataset_config("taxi"), work / "tfma")


def _reference_serving_dir(work: Path, beam_workers: int) -> tuple[Path | None, str | None]:
    """(the reference benchmark's pushed reference model, None), the reference pipeline run at taxi size first when
    absent; or (None, why) where its Pusher pushed nothing (its Evaluator did not bless the model)."""
    from tests.bench import pipelines
    from torchtfx.data.config.dataset import load_dataset_config
    from torchtfx.data.csv_reader.sources import default_data_dir

    root = work / "reference"
    if not (root / "serving").is_dir():
        shutil.rmtree(root, ignore_errors=True)
        dataset = load_dataset_config("taxi")
        pipelines.run_reference(root, default_data_dir(dataset), pipelines.beam_args(beam_workers, dataset, work))
    if not (root / "serving").is_dir():
        return None, f"the reference pipeline pushed no model to {root / 'serving'} (not blessed)"
    return pipelines.only_subdir(root / "serving"), None


def _serving(work: Path, beam_workers: int) -> dict:
    from tests.bench import pipelines
    from tests.bench.serving_bench import serving
    from torchtfx.components.shared import contracts
    from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
    from torchtfx.components.torch_trainer.modeling.features import FeatureLayout
    from torchtfx.components.torch_trainer.savedmodel.parity import measure_parity
    from torchtfx.components.torch_trainer.savedmodel.trained_model import load_torch_model

    root = _our_taxi_run(work, beam_workers)
    export_dir = contracts.export_dir(pipelines.only_subdir(root / "tfx" / contracts.TRAINER_ID / "model"))
    layout = FeatureLayout.from_json((export_dir / contracts.LAYOUT_FILE).read_text())  # the model's own column order
    serving_dir = pipelines.only_subdir(root / "serving" / "taxi")
    raw_eval = pipelines.eval_examples_dir(root)
    hparams = TrainerHParams()  # `torchtfx run` defaults, as the reference benchmark ran it
    # TFX's taxi native-Keras model as its Pusher pushed it, its serving_default fed our same eval rows (issue 29)
    reference_dir, reference_unavailable = _reference_serving_dir(work, beam_workers)
    result = serving(export_dir, serving_dir, raw_eval, layout, hparams, work / "serving", reference_dir)
    parity = measure_parity(
        str(serving_dir), str(raw_eval), load_torch_model(export_dir, layout, hparams), layout, 1e-5
    )
    return {
        **result,
        "parity_max_abs_diff": parity.max_abs_diff,
        "parity_examples": parity.examples,
        "reference_unavailable": reference_unavailable,
    }


def _trainer_root(work: Path, sizes: list[int]) -> Path:
    """The smallest scale run there is, else the taxi run (taxi's 10k rows train in a second)."""
    for rows in sorted(sizes):
        if (work / f"ours_{rows}").exists():
            return work / f"ours_{rows}"
    return work / "ours"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, default=list(BENCHMARKS))
    parser.add_argument("--work", type=Path, default=Path("runs/bench"), help="pipeline roots and scratch")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--beam-workers", type=int, default=2)
    parser.add_argument(
        "--scale-rows",
        type=int,
        nargs="+",
        default=[1_000_000],
        help="scale: row counts, each run by the reference and by ours (5M on request: 1000000 5000000)",
    )
    parser.add_argument("--trainer-epochs", type=int, default=3)
    parser.add_argument("--reuse-runs", action="store_true", help="re-score the last reference/ours runs")
    parser.add_argument(
        "--zoo-set",
        choices=("builtin", "research", "all"),
        default="all",
        help="zoo: the built-in zoo models, the research corpus (tests/bench/research_zoo/), or both",
    )
    parser.add_argument(
        "--zoo-models",
        nargs="+",
        metavar="NAME",
        help="zoo: only these models (built-in zoo names or corpus file names, e.g. rtdl_mlp)",
    )
    parser.add_argument(
        "--pretrained-full",
        action="store_true",
        help="pretrained_finetune: the pair on every review instead of the sample (over an hour on 2 cores); "
        "the sample pair's recorded figures are kept",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)

    from tests.bench import (
        predict_bench,
        pretrained_finetune_bench,
        pretrained_serving_bench,
        scale_bench,
        sequence_serving_bench,
        trainer_bench,
        zoo_bench,
    )
    from torchtfx.data.config.dataset import load_dataset_config
    from torchtfx.data.csv_reader.sources import default_data_dir

    taxi = load_dataset_config("taxi")
    steps = {
        "reference": lambda: _reference(work, args.beam_workers, args.reuse_runs),
        "serving": lambda: _serving(work, args.beam_workers),
        "scale": lambda: scale_bench.scale(args.scale_rows, work, args.beam_workers),
        "input_path": lambda: trainer_bench.input_path(
            trainer_bench.TrainerInputs.of_run(_trainer_root(work, args.scale_rows)),
            taxi,
            work / "input_path",
            args.trainer_epochs,
        ),
        "ddp": lambda: {
            **trainer_bench.ddp_scaling(
                trainer_bench.TrainerInputs.of_run(_trainer_root(work, args.scale_rows)),
                taxi,
                work / "ddp",
                args.trainer_epochs,
            ),
            "small_data": trainer_bench.launch_choice(
                trainer_bench.TrainerInputs.of_run(_our_taxi_run(work, args.beam_workers)), taxi, work / "launch"
            ),
        },
        # result name -> payload: zoo.json (built-in) and research_zoo.json (the corpus), as --zoo-set asks
        "zoo": lambda: zoo_bench.zoo_sets(work, args.beam_workers, args.zoo_set, args.zoo_models),
        "evaluator": lambda: _evaluator(work, args.beam_workers),
        # the movie_reviews pipeline (run under <work>/text unless there) and its text model's serving latency
        "serving_text": lambda: sequence_serving_bench.sequence_serving(work, args.beam_workers),
        # torchtfx predict against a plain loop over the SavedModel and the MLflow pyfunc (issue 30)
        "predict": lambda: predict_bench.predict_bench(
            _our_taxi_run(work, args.beam_workers), default_data_dir(taxi), work / "predict"
        ),
        # movie_reviews_minilm against movie_reviews (text_transformer) on the same sample and split (issue 43)
        "pretrained_finetune": lambda: pretrained_finetune_bench.pretrained_finetune(
            work, args.beam_workers, args.pretrained_full, _recorded("pretrained_finetune", args.out)
        ),
        # the MiniLM model's served signature against tokenizers + onnxruntime / + torch eager (issue 43)
        "serving_pretrained": lambda: pretrained_serving_bench.pretrained_serving(work, args.beam_workers),
    }
    for name in BENCHMARKS:
        if name == "zoo" and name in args.only:
            for result_name, payload in steps[name]().items():
                _write(result_name, payload, args.out)
        elif name in args.only:
            _write(name, steps[name](), args.out)
    from tests.bench.report import write_report

    write_report(args.out)


if __name__ == "__main__":
    main()
