"""Every zoo model through our pipeline on the packaged taxi data, then, from each run's Model artifact:
conversion time, strategy and repairs, parity on the whole eval split, serving latency of the converted
network against onnxruntime and PyTorch eager, and eval AUC.

All models share one pipeline root, so ML Metadata caches ExampleGen, StatisticsGen and Transform after the
first. ``--max-auc-drop 1.0``: no model is held back by the champion it follows, only by the value gates
(AUC floor); a rejected model is still measured. Each promoted model's label move is confirmed with
``torchtfx promote --finish`` (no TF Serving here to confirm the load), without which the next model's
promotion would be refused.

The research corpus (:mod:`tests.bench.research_zoo`: third-party published models, each a factory file) runs the
same way on the first 3,000 rows of the taxi CSV (``--epochs 8 --batch-size 64``), each model measured as a
built-in one and, besides, exported again with the dynamo exporter (``torch.export``) in its own process: its
export time against the legacy exporter's, and whether its graph translates with parity against onnxruntime
on the legacy graph.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import itertools
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tests.bench import pipelines
from tests.bench.serving_bench import (
    BATCH_SIZES,
    _eval_rows,
    _network_inputs,
    call_floor,
    interleaved_latency_ms,
    network_call,
    ratios,
    session_timers,
)
from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout

logger = logging.getLogger(__name__)

DATASET = "taxi"
RUNTIMES = (
    "converted_network_session",
    "converted_network",
    "onnxruntime",
    "torch",
    "tf_session_floor",
    "tf_call_floor",
    "savedmodel_signature_session",
    "savedmodel_signature",
)
AUC_SOURCE = (
    "tfma_auc: the pipeline Evaluator's TFMA AUC (Overall slice) of the SavedModel on the eval split; "
    f"torch_eval_auc: the TorchTrainer's '{contracts.EVAL_AUC_PROPERTY}' property (PyTorch, eval split)"
)
PARITY_TOLERANCE = 1e-5
ZOO_SETS = ("builtin", "research", "all")
RESEARCH_SAMPLE_ROWS = 3000  # the first rows of the taxi CSV, as tests/e2e/test_zoo.py runs the corpus
RESEARCH_ARGS = ("--epochs", "8", "--batch-size", "64")


@dataclasses.dataclass(frozen=True)
class ZooRun:
    """One model's pipeline run, as ML Metadata recorded it."""

    model: str
    run: pipelines.PipelineRun
    model_uri: Path
    blessed: bool | None
    pushed_to: str | None
    torch_eval_auc: float | None
    tfma_auc: float | None
    pipeline_conversion: str | None
    pipeline_parity: float | None


def run_hparams(dataset: str, model: str) -> TrainerHParams:
    """The hyperparameters ``torchtfx run --dataset DATASET --model MODEL`` trains with (the same resolver)."""
    from torchtfx.pipeline.settings.declared import LOCAL
    from torchtfx.pipeline.settings.layers import command_line_layer
    from torchtfx.pipeline.settings.model_choice import checked_hparams
    from torchtfx.pipeline.settings.resolve import resolve_settings

    resolved = resolve_settings(LOCAL, command_line_layer({"dataset": dataset, "model.factory": model}))
    return checked_hparams(resolved.dataset, resolved.hparams)


def run_model(
    root: Path,
    data_dir: Path,
    model: str,
    beam_workers: int,
    extra: tuple[str, ...] = (),
    label: str | None = None,
    serving_dir: Path | None = None,
) -> ZooRun:
    """``torchtfx run --model model`` under ``root``, then, if it promoted the model, ``torchtfx promote
    --finish``; ``label``: the model's name in the results (default ``model``)."""
    from torchtfx.pipeline.cli.errors import REJECTED_EXIT_CODE

    label = label or model
    serving_dir = serving_dir or root / "serving" / DATASET  # `torchtfx run`'s default (LocalSettings)
    extra = ["--model", model, "--max-auc-drop", "1.0", "--serving-dir", str(serving_dir), *extra]
    log = root.parent / f"{root.name}_{label}.log"
    run = pipelines.run_ours(root, data_dir, DATASET, beam_workers, extra, log, accept=(0, REJECTED_EXIT_CODE))
    summary = pipelines.latest_recorded_run(root)
    artifact = summary.output(contracts.TRAINER_ID, "model")
    if artifact is None:
        raise RuntimeError(f"no {contracts.TRAINER_ID} Model artifact in the latest run under {root}; log {log}")
    if summary.pushed_to is not None:
        finish_promotion(root, serving_dir, log)
    torch_auc = summary.custom(contracts.TRAINER_ID, "model", contracts.EVAL_AUC_PROPERTY)
    return ZooRun(
        model=label,
        run=run,
        model_uri=Path(artifact.uri),
        blessed=summary.blessed,
        pushed_to=summary.pushed_to,
        torch_eval_auc=None if torch_auc is None else float(torch_auc),
        tfma_auc=pipelines.evaluator_metrics(root).get("auc"),
        pipeline_conversion=summary.custom(contracts.TRAINER_ID, "model", contracts.CONVERSION_PROPERTY),
        pipeline_parity=summary.parity,
    )


def finish_promotion(root: Path, serving_dir: Path, log: Path) -> None:
    """``torchtfx promote --finish``: the operator's confirmation of the staged version (no TF Serving here),
    without which the next model's promotion is refused; its output is appended to ``log``."""
    command = [
        str(Path(sys.executable).with_name("torchtfx")),
        "promote",
        "--dataset",
        DATASET,
        "--pipeline-root",
        str(root),
        "--serving-dir",
        str(serving_dir),
        "--finish",
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    with log.open("a") as handle:
        handle.write(f"\n$ {' '.join(command)}\n{done.stdout}{done.stderr}")
    if done.returncode != 0:
        raise RuntimeError(f"torchtfx promote --finish failed ({done.returncode}): {done.stderr.strip()[-600:]}")
    logger.info("zoo: promotion finished: %s", done.stdout.strip()[-200:])


def _runtimes(
    network_fn: Callable, export_dir: Path, layout: FeatureLayout, hparams: TrainerHParams, threads: int
) -> dict[str, Callable[[np.ndarray, np.ndarray], object]]:
    """name -> callable(dense, categorical), every runtime on ``threads`` intra-op threads; ``network_fn``:
    the converted network's :func:`network_call`."""
    import onnxruntime as ort
    import torch

    from torchtfx.components.torch_trainer.modeling.heads import ExportHead
    from torchtfx.components.torch_trainer.savedmodel.trained_model import load_torch_model

    torch.set_num_threads(threads)
    widths = len(layout.dense), len(layout.embedded)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    onnx_file = str(export_dir / contracts.ONNX_FILE)
    session = ort.InferenceSession(onnx_file, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]  # (dense, categorical), the export's input order
    torch_net = ExportHead.for_layout(load_torch_model(export_dir, layout, hparams), layout).eval()

    def torch_call(d: np.ndarray, c: np.ndarray) -> object:
        with torch.inference_mode():
            return torch_net(torch.from_numpy(d), torch.from_numpy(c))

    return {
        "converted_network": network_fn,
        "onnxruntime": lambda d, c: session.run(None, {names[0]: d, names[1]: c}),
        "torch": torch_call,
        "tf_call_floor": call_floor(*widths),  # what any TF function call costs from Python (serving_bench)
    }


def _signature_call(saved, examples: list[bytes]) -> Callable[[np.ndarray, np.ndarray], object]:
    """The whole ``serving_default`` (parse + TFT + network) on the same first rows as the network's inputs."""
    import tensorflow as tf

    from torchtfx.components.shared.served_interface import EXAMPLES_INPUT, SERVING_SIGNATURE

    serve = saved.signatures[SERVING_SIGNATURE]
    batches = {batch: tf.constant(examples[:batch]) for batch in BATCH_SIZES}
    return lambda d, c: serve(**{EXAMPLES_INPUT: batches[len(d)]})


def _latencies(
    runtimes: dict[str, Callable], dense: np.ndarray, categorical: np.ndarray, model: str, sessions: dict | None = None
) -> dict:
    """name -> batch -> latency of every runtime, and of every ``session_run.SessionRun`` in ``sessions``."""
    results: dict[str, dict[str, dict]] = {}
    for batch in BATCH_SIZES:
        d, c = dense[:batch], categorical[:batch]
        calls = {name: functools.partial(fn, d, c) for name, fn in runtimes.items()}
        timers = {name: run.timer(batch) for name, run in (sessions or {}).items()}
        for name, found in interleaved_latency_ms(calls, timers).items():
            results.setdefault(name, {})[str(batch)] = found
            logger.info("zoo %s %s batch %s: %.3f ms", model, name, batch, found["median_ms"])
    return results


def fp16_variant(fp32_network, export_dir: Path, layout: FeatureLayout, saved, raw_eval: Path, model: str) -> dict:
    """The reduced-precision variant the Trainer would serve with ``--serving-precision fp16``: its drift
    against the FP32 network on every eval row (the default drift limits decide), and its latency beside
    the FP32 network's."""

    from torchtfx.components.torch_trainer.savedmodel.precision import (
        PrecisionVariantError,
        drift_figures,
        reduced_precision_network,
    )
    from torchtfx.data.config.serving_precision import DriftLimits

    try:
        network, method = reduced_precision_network(export_dir / contracts.ONNX_FILE)
    except PrecisionVariantError as err:
        return {"error": str(err)}
    dense, categorical = _network_inputs(saved, _eval_rows(raw_eval, 10**9), layout)
    widths = dense.shape[1], categorical.shape[1]
    calls = {"fp32_network": network_call(fp32_network, *widths), "fp16_network": network_call(network, *widths)}
    outputs = {name: fn(dense, categorical).numpy() for name, fn in calls.items()}
    drift = drift_figures(outputs["fp32_network"], outputs["fp16_network"], layout.task, DriftLimits(), method)
    latency = _latencies(calls, dense, categorical, f"{model} precision")
    ratio = {
        b: latency["fp16_network"][b]["median_ms"] / latency["fp32_network"][b]["median_ms"]
        for b in latency["fp16_network"]
    }
    return {
        "method": method,
        "passed": drift.passed,
        "violations": list(drift.violations),
        "figures": drift.to_metrics(),
        "latency": latency,
        "fp16_vs_fp32": ratio,
    }


def measure(zoo_run: ZooRun, raw_eval: Path, hparams: TrainerHParams, work: Path, threads: int) -> dict:
    """Conversion, parity and latency of one run's Model artifact."""
    import tensorflow as tf

    from torchtfx.components.torch_trainer.savedmodel.convert import convert_onnx
    from torchtfx.components.torch_trainer.savedmodel.parity import measure_parity
    from torchtfx.components.torch_trainer.savedmodel.trained_model import load_torch_model

    export_dir = contracts.export_dir(zoo_run.model_uri)
    serving_dir = zoo_run.model_uri / contracts.SERVING_MODEL_SUBDIR
    layout = FeatureLayout.from_json((export_dir / contracts.LAYOUT_FILE).read_text())
    saved = tf.saved_model.load(str(serving_dir))
    tick = time.perf_counter()
    conversion = convert_onnx(export_dir / contracts.ONNX_FILE, work / zoo_run.model / "convert")
    conversion_seconds = time.perf_counter() - tick
    examples = cycled(_eval_rows(raw_eval, max(BATCH_SIZES)), max(BATCH_SIZES))  # a sample's eval split is short
    dense, categorical = _network_inputs(saved, examples, layout)
    tick = time.perf_counter()
    network_fn = network_call(conversion.network, dense.shape[1], categorical.shape[1])  # traces: once per model
    network_fn(dense[:1], categorical[:1])
    trace_seconds = time.perf_counter() - tick
    runtimes = _runtimes(network_fn, export_dir, layout, hparams, threads)
    runtimes["savedmodel_signature"] = _signature_call(saved, examples)
    with contextlib.ExitStack() as stack:
        sessions, unavailable = session_timers(
            conversion.network, serving_dir, examples, dense, categorical, work / zoo_run.model / "c_api", stack
        )
        latency = _latencies(runtimes, dense, categorical, zoo_run.model, sessions)
    network_runtime = "converted_network_session" if sessions else "converted_network"
    torch_model = load_torch_model(export_dir, layout, hparams)
    parity = measure_parity(str(serving_dir), str(raw_eval), torch_model, layout, PARITY_TOLERANCE)
    fp16 = fp16_variant(conversion.network, export_dir, layout, saved, raw_eval, zoo_run.model)
    return {
        "conversion_seconds": conversion_seconds,
        "first_call_trace_seconds": trace_seconds,
        "strategy": conversion.strategy,
        "repairs": list(conversion.repairs),
        "parity_max_abs_diff": parity.max_abs_diff,
        "parity_mean_abs_diff": parity.mean_abs_diff,
        "parity_examples": parity.examples,
        "latency": latency,
        "c_api_unavailable": unavailable,
        "target_runtime": network_runtime,
        "converted_vs_onnxruntime": ratios(latency, network_runtime, "onnxruntime"),
        "converted_vs_torch": ratios(latency, network_runtime, "torch"),
        "fp16": fp16,
    }


def cycled(rows: list[bytes], count: int) -> list[bytes]:
    """``count`` rows, ``rows`` repeated where there are fewer (so that every batch size has its rows)."""
    return list(itertools.islice(itertools.cycle(rows), count)) if rows else rows


def zoo_row(zoo_run: ZooRun, measured: dict) -> dict:
    """One model's entry of ``zoo.json``: its run's record, then what was measured on its Model artifact."""
    run = zoo_run.run
    return {
        "model": zoo_run.model,
        "model_uri": str(zoo_run.model_uri),
        "wall_seconds": run.wall_seconds,
        "stages": run.stages,
        "blessed": zoo_run.blessed,
        "pushed": zoo_run.pushed_to is not None,
        "tfma_auc": zoo_run.tfma_auc,
        "torch_eval_auc": zoo_run.torch_eval_auc,
        "pipeline_conversion": zoo_run.pipeline_conversion,
        "pipeline_parity_max_abs_diff": zoo_run.pipeline_parity,
        **measured,
    }


def _set_tf_threads(threads: int) -> None:
    import tensorflow as tf

    with contextlib.suppress(RuntimeError):  # TF already initialized in this process: keeps its (all-core) pools
        tf.config.threading.set_intra_op_parallelism_threads(threads)


def zoo(work: Path, beam_workers: int, models: tuple[str, ...] | None = None) -> dict:
    """Every built-in zoo model (or ``models``) through the pipeline on the packaged taxi data."""
    from torchtfx.components.torch_trainer.modeling.factory import ZOO
    from torchtfx.data.config.dataset import load_dataset_config
    from torchtfx.data.csv_reader.sources import default_data_dir

    dataset = load_dataset_config(DATASET)
    root, scratch = work / "zoo", work / "zoo_scratch"
    threads = os.cpu_count() or 1
    _set_tf_threads(threads)
    rows = []
    for model in models or ZOO:
        try:  # a pipeline failure (e.g. the parity gate) is this model's result, not the benchmark's end
            zoo_run = run_model(root, default_data_dir(dataset), model, beam_workers)
        except RuntimeError as err:
            logger.error("zoo %s: %s", model, err)
            rows.append({"model": model, "error": str(err)[-2000:]})
            continue
        hparams = run_hparams(dataset.name, model)
        measured = measure(zoo_run, pipelines.eval_examples_dir(root), hparams, scratch, threads)
        rows.append(zoo_row(zoo_run, measured))
    return {
        "dataset": DATASET,
        "pipeline_root": str(root),
        "threads": threads,
        "batch_sizes": list(BATCH_SIZES),
        "runtimes": list(RUNTIMES),
        "auc_source": AUC_SOURCE,
        "models": rows,
    }


def zoo_sets(work: Path, beam_workers: int, zoo_set: str = "all", names: list[str] | None = None) -> dict[str, dict]:
    """Result name -> payload: ``zoo`` (the built-in zoo) and/or ``research_zoo`` (the corpus), as ``zoo_set``
    asks; ``names``: only these models (built-in or corpus names), each set keeping those of its own."""
    from tests.bench.research_zoo import CORPUS
    from torchtfx.components.torch_trainer.modeling.factory import ZOO

    unknown = sorted(set(names or ()) - set(ZOO) - {m.name for m in CORPUS})
    if unknown:
        raise ValueError(f"--zoo-models: neither built-in zoo models ({', '.join(ZOO)}) nor corpus models: {unknown}")
    results = {}
    if zoo_set in ("builtin", "all"):
        builtin = tuple(m for m in ZOO if m in names) if names else None
        if builtin is None or builtin:
            results["zoo"] = zoo(work, beam_workers, builtin)
    if zoo_set in ("research", "all"):
        research = [m.name for m in CORPUS if m.name in names] if names else None
        if research is None or research:
            results["research_zoo"] = research_zoo(work, beam_workers, research)
    return results


def sample_data(source: Path, directory: Path, rows: int | None = RESEARCH_SAMPLE_ROWS, every: int = 1) -> Path:
    """Rows ``[:rows:every]`` of ``source`` as ``directory/data.csv``, written once (an unchanged file keeps
    ExampleGen cached across benchmark runs)."""
    out = directory / "data.csv"
    if not out.is_file():
        directory.mkdir(parents=True, exist_ok=True)
        with source.open(newline="") as rows_in, out.open("w", newline="") as sink:
            reader = csv.DictReader(rows_in)
            writer = csv.DictWriter(sink, fieldnames=list(reader.fieldnames or ()))
            writer.writeheader()
            writer.writerows(itertools.islice(reader, 0, rows, every))
    return directory


def parse_conversion(text: str | None) -> dict:
    """The Model artifact's ``onnx_conversion`` ("translator; repairs: a, b; exporter: legacy[; symbolics: c]")
    as its parts; ``exporter`` is None in artifacts written before the dynamo exporter existed."""
    parts = [part.strip() for part in (text or "").split(";") if part.strip()]
    fields = dict(part.split(": ", 1) for part in parts[1:] if ": " in part)
    listed = {
        key: [v.strip() for v in fields.get(key, "").split(",") if v.strip() not in ("", "none")]
        for key in ("repairs", "symbolics")
    }
    return {"strategy": parts[0] if parts else None, "exporter": fields.get("exporter"), **listed}


def research_zoo(work: Path, beam_workers: int, names: list[str] | None = None) -> dict:
    """The research corpus (or its ``names``) through the pipeline on the taxi sample, one root for all."""
    from tests.bench.research_zoo import by_name
    from torchtfx.data.config.dataset import load_dataset_config
    from torchtfx.data.csv_reader.sources import default_data_dir

    dataset = load_dataset_config(DATASET)
    root, scratch, serving = work / "research_zoo", work / "research_zoo_scratch", work / "research_zoo_serving"
    data_dir = sample_data(default_data_dir(dataset) / "data.csv", work / "research_zoo_data")
    threads = os.cpu_count() or 1
    _set_tf_threads(threads)
    rows = []
    for entry in by_name(names):
        described = {
            "model": entry.name,
            "factory": f"tests/bench/research_zoo/{entry.path.name}:build",
            **entry.describe(),
        }
        try:
            zoo_run = run_model(root, data_dir, entry.factory, beam_workers, RESEARCH_ARGS, entry.name, serving)
        except RuntimeError as err:
            logger.error("research zoo %s: %s", entry.name, err)
            rows.append({**described, "error": str(err)[-2000:]})
            continue
        rows.append({**described, **research_row(zoo_run, entry.factory, root, scratch, threads)})
    return {
        "dataset": DATASET,
        "sample_rows": RESEARCH_SAMPLE_ROWS,
        "run_args": list(RESEARCH_ARGS),
        "pipeline_root": str(root),
        "threads": threads,
        "batch_sizes": list(BATCH_SIZES),
        "runtimes": list(RUNTIMES),
        "auc_source": AUC_SOURCE,
        "parity_tolerance": PARITY_TOLERANCE,
        "models": rows,
    }


def research_row(zoo_run: ZooRun, factory: str, root: Path, scratch: Path, threads: int) -> dict:
    """A corpus model's built-in-zoo measurements, its pipeline conversion's parts and the dynamo exporter's
    figures; a measurement that fails (third-party code) is the row's error, the run's record kept."""

    hparams = run_hparams(DATASET, factory)
    raw_eval = pipelines.eval_examples_dir(root)
    row = {**zoo_row(zoo_run, {}), "conversion": parse_conversion(zoo_run.pipeline_conversion)}
    try:
        row.update(measure(zoo_run, raw_eval, hparams, scratch, threads))
    except Exception as err:  # any failure of a third-party model is its result, not the benchmark's end
        logger.exception("research zoo %s: measuring failed", zoo_run.model)
        return {**row, "error": f"measuring failed: {type(err).__name__}: {err}"[-2000:]}
    try:
        row["dynamo"] = dynamo_exporter(zoo_run, hparams, raw_eval, scratch / zoo_run.model / "dynamo")
    except Exception as err:  # as above: the dynamo figures of this model only
        logger.exception("research zoo %s: the dynamo exporter's measurement failed", zoo_run.model)
        row["dynamo"] = {"ok": False, "error": f"{type(err).__name__}: {err}"[-600:]}
    return row


def dynamo_exporter(zoo_run: ZooRun, hparams: TrainerHParams, raw_eval: Path, work: Path) -> dict:
    """The trained network exported again by each exporter, timed: the legacy one in this process (as the
    Trainer runs it), the dynamo one (``torch.export``) in its child process, start and imports included (as
    the Trainer runs it); then whether the dynamo graph translates with parity against onnxruntime on the
    legacy graph, over every eval row."""
    from torchtfx.components.torch_trainer.torch_to_onnx import dynamo_export

    if not dynamo_export.available():
        return {"ok": False, "error": f"the dynamo exporter is not installed in {dynamo_export.packages_dir()}"}
    export_dir = contracts.export_dir(zoo_run.model_uri)
    layout = FeatureLayout.from_json((export_dir / contracts.LAYOUT_FILE).read_text())
    dense, categorical = _transformed_eval(zoo_run.model_uri, raw_eval, layout)
    result: dict = {"eval_rows": len(dense), **_legacy_export_seconds(export_dir, layout, hparams, dense, categorical)}
    path = work / "dynamo.onnx"
    work.mkdir(parents=True, exist_ok=True)
    try:
        result["dynamo_export_seconds"] = _dynamo_export(export_dir, layout, hparams, path, dense, categorical)
        result["dynamo_child_start_seconds"] = _dynamo_child_start_seconds()
    except (dynamo_export.DynamoExportError, subprocess.TimeoutExpired) as err:
        logger.warning("research zoo %s: the dynamo exporter failed: %s", zoo_run.model, err)
        return {**result, "ok": False, "error": f"export failed: {err}"}
    return {**result, **_dynamo_parity(path, export_dir / contracts.ONNX_FILE, dense, categorical)}


def _transformed_eval(model_uri: Path, raw_eval: Path, layout: FeatureLayout) -> tuple[np.ndarray, np.ndarray]:
    """Every eval row through the served model's transform signature: the network's inputs."""
    import tensorflow as tf

    saved = tf.saved_model.load(str(model_uri / contracts.SERVING_MODEL_SUBDIR))
    return _network_inputs(saved, _eval_rows(raw_eval, 10**9), layout)


def _head(export_dir: Path, layout: FeatureLayout, hparams: TrainerHParams):
    from torchtfx.components.torch_trainer.modeling.heads import ExportHead
    from torchtfx.components.torch_trainer.savedmodel.trained_model import load_torch_model

    return ExportHead.for_layout(load_torch_model(export_dir, layout, hparams), layout).eval()


def _legacy_export_seconds(
    export_dir: Path, layout: FeatureLayout, hparams: TrainerHParams, dense: np.ndarray, categorical: np.ndarray
) -> dict:
    """The legacy exporter's trace at the Trainer's trace batch (its symbolics registered), timed."""
    from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
    from torchtfx.components.torch_trainer.torch_to_onnx import onnx_export

    split = ArraySplit(dense, categorical, np.zeros(len(dense), np.float32))
    head = _head(export_dir, layout, hparams)
    tick = time.perf_counter()
    try:
        onnx_export._trace(head, split, onnx_export.TRACE_BATCH)
    except onnx_export.ExportError as err:  # the Trainer then used the dynamo exporter
        return {"legacy_export_seconds": None, "legacy_error": str(err)[-600:]}
    return {"legacy_export_seconds": time.perf_counter() - tick}


def _dynamo_child_start_seconds() -> float:
    """What the dynamo exporter's child process spends before exporting: start, then import torch and
    onnxscript from the exporter's own packages."""
    from torchtfx.components.torch_trainer.torch_to_onnx.dynamo_export import packages_dir

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(packages_dir()), *sys.path]))}
    tick = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch, onnxscript"], check=True, capture_output=True, env=env)
    return time.perf_counter() - tick


def _dynamo_export(
    export_dir: Path, layout: FeatureLayout, hparams: TrainerHParams, path: Path, dense, categorical
) -> float:
    from torchtfx.components.torch_trainer.torch_to_onnx.dynamo_export import ModelRecipe, export_with_dynamo
    from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import TRACE_BATCH

    head = _head(export_dir, layout, hparams)
    recipe = ModelRecipe(hparams.model, layout.model_spec(), layout.task, layout.log1p_target)
    tick = time.perf_counter()
    export_with_dynamo(recipe, head.model, TRACE_BATCH, path)
    return time.perf_counter() - tick


def _static_batch(graph) -> int | None:
    """The batch size the graph's inputs declare, where it is a number rather than a symbol: the dynamo exporter
    gives such a graph, without a word, where ``torch.export`` finds that the model specializes the batch."""
    sizes = {i.type.tensor_type.shape.dim[0].dim_value for i in graph.graph.input if i.type.tensor_type.shape.dim}
    sizes.discard(0)  # a symbolic (or unknown) batch dimension
    return min(sizes) if sizes else None


def _dynamo_parity(dynamo_path: Path, legacy_path: Path, dense: np.ndarray, categorical: np.ndarray) -> dict:
    """The dynamo graph, repaired and translated (``OnnxGraphModule``), against onnxruntime on the legacy graph,
    on every eval row (on the first rows only where the graph's batch is fixed, which fails the check)."""
    import onnx
    import onnxruntime as ort
    import tensorflow as tf

    from torchtfx.components.converter import repairs
    from torchtfx.components.converter.translator import OnnxGraphModule, UnsupportedOpsError, unsupported_ops

    graph, fired = repairs.apply_graph_repairs(onnx.load(str(dynamo_path)))
    static = _static_batch(graph)
    result: dict = {"dynamo_repairs": list(fired), "dynamo_ops": len(graph.graph.node), "fixed_batch": static}
    missing = unsupported_ops(graph)
    if missing:
        return {**result, "ok": False, "error": f"not translated: {UnsupportedOpsError(missing)}"}
    dense, categorical = (dense[:static], categorical[:static]) if static else (dense, categorical)
    try:
        got = OnnxGraphModule(graph)(tf.constant(dense), tf.constant(categorical))[0].numpy()
    except Exception as err:  # the translator's failure on this graph is the result
        return {**result, "ok": False, "error": f"translation failed: {type(err).__name__}: {err}"[-600:]}
    session = ort.InferenceSession(str(legacy_path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    (want,) = session.run(None, {names[0]: dense, names[1]: categorical})
    if got.size != want.size:
        return {**result, "ok": False, "error": f"output shape {got.shape} against the legacy {want.shape}"}
    diff = float(np.max(np.abs(got.reshape(want.shape) - want))) if want.size else 0.0
    result.update(parity_max_abs_diff=diff, parity_rows=len(dense), ok=diff <= PARITY_TOLERANCE and not static)
    if static:
        result["error"] = (
            f"batch fixed at {static} (torch.export specialized the batch dimension; the exporter "
            f"dropped it without an error); at that batch, parity {diff:.2e}"
        )
    elif not result["ok"]:
        result["error"] = f"parity {diff:.3g} > {PARITY_TOLERANCE}"
    return result
