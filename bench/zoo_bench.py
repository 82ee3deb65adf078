"""Every zoo model through our pipeline on the packaged taxi data, then, from each run's Model artifact:
conversion time, strategy and repairs, parity on the whole eval split, serving latency of the converted
network against onnxruntime and PyTorch eager, and eval AUC.

All models share one pipeline root, so ML Metadata caches ExampleGen, StatisticsGen and Transform after the
first. ``--max-auc-drop 1.0``: no model is held back by the champion it follows, only by the value gates
(AUC floor); a rejected model is still measured.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench import pipelines
from bench.serving_bench import (
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
from torchtfx.components.torch_trainer.features import FeatureLayout
from torchtfx.components.torch_trainer.hparams import TrainerHParams

logger = logging.getLogger(__name__)

DATASET = "taxi"
RUNTIMES = ("converted_network_session", "converted_network", "onnxruntime", "torch", "tf_session_floor",
            "tf_call_floor", "savedmodel_signature_session", "savedmodel_signature")  # fmt: skip
AUC_SOURCE = (
    "tfma_auc: the pipeline Evaluator's TFMA AUC (Overall slice) of the SavedModel on the eval split; "
    f"torch_eval_auc: the TorchTrainer's '{contracts.EVAL_AUC_PROPERTY}' property (PyTorch, eval split)"
)
PARITY_TOLERANCE = 1e-5


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


def run_model(root: Path, data_dir: Path, model: str, beam_workers: int) -> ZooRun:
    from tfx.orchestration import metadata

    from torchtfx.pipeline.cli.errors import REJECTED_EXIT_CODE
    from torchtfx.pipeline.reporting.summary import latest_run

    extra = ["--model", model, "--max-auc-drop", "1.0"]
    log = root.parent / f"{root.name}_{model}.log"
    run = pipelines.run_ours(root, data_dir, DATASET, beam_workers, extra, log, accept=(0, REJECTED_EXIT_CODE))
    summary = latest_run(metadata.sqlite_metadata_connection_config(str(root / "metadata.sqlite")))
    artifact = summary.output(contracts.TRAINER_ID, "model") if summary else None
    if artifact is None:
        raise RuntimeError(f"no {contracts.TRAINER_ID} Model artifact in the latest run under {root}; log {log}")
    torch_auc = summary.custom(contracts.TRAINER_ID, "model", contracts.EVAL_AUC_PROPERTY)
    return ZooRun(
        model=model, run=run, model_uri=Path(artifact.uri), blessed=summary.blessed, pushed_to=summary.pushed_to,
        torch_eval_auc=None if torch_auc is None else float(torch_auc),
        tfma_auc=pipelines.evaluator_metrics(root).get("auc"),
        pipeline_conversion=summary.custom(contracts.TRAINER_ID, "model", contracts.CONVERSION_PROPERTY),
        pipeline_parity=summary.parity,
    )  # fmt: skip


def _runtimes(
    network_fn: Callable, export_dir: Path, layout: FeatureLayout, hparams: TrainerHParams, threads: int
) -> dict[str, Callable[[np.ndarray, np.ndarray], object]]:
    """name -> callable(dense, categorical), every runtime on ``threads`` intra-op threads; ``network_fn``:
    the converted network's :func:`network_call`."""
    import onnxruntime as ort
    import torch

    from torchtfx.components.torch_trainer.modeling.heads import ExportHead
    from torchtfx.components.torch_trainer.trained_model import load_torch_model

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

    from torchtfx.components.torch_trainer.export.convert import EXAMPLES_INPUT, SERVING_SIGNATURE

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

    from torchtfx.components.torch_trainer.export.precision import (
        PrecisionVariantError,
        drift_figures,
        reduced_precision_network,
    )
    from torchtfx.data.config.serving import DriftLimits

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
    return {"method": method, "passed": drift.passed, "violations": list(drift.violations),
            "figures": drift.to_metrics(), "latency": latency, "fp16_vs_fp32": ratio}  # fmt: skip


def measure(zoo_run: ZooRun, raw_eval: Path, hparams: TrainerHParams, work: Path, threads: int) -> dict:
    """Conversion, parity and latency of one run's Model artifact."""
    import tensorflow as tf

    from torchtfx.components.torch_trainer.export.convert import convert_onnx
    from torchtfx.components.torch_trainer.export.parity import measure_parity
    from torchtfx.components.torch_trainer.trained_model import load_torch_model

    export_dir = contracts.export_dir(zoo_run.model_uri)
    serving_dir = zoo_run.model_uri / contracts.SERVING_MODEL_SUBDIR
    layout = FeatureLayout.from_json((export_dir / contracts.LAYOUT_FILE).read_text())
    saved = tf.saved_model.load(str(serving_dir))
    tick = time.perf_counter()
    conversion = convert_onnx(export_dir / contracts.ONNX_FILE, work / zoo_run.model / "convert")
    conversion_seconds = time.perf_counter() - tick
    examples = _eval_rows(raw_eval, max(BATCH_SIZES))
    dense, categorical = _network_inputs(saved, examples, layout)
    tick = time.perf_counter()
    network_fn = network_call(conversion.network, dense.shape[1], categorical.shape[1])  # traces: once per model
    network_fn(dense[:1], categorical[:1])
    trace_seconds = time.perf_counter() - tick
    runtimes = _runtimes(network_fn, export_dir, layout, hparams, threads)
    runtimes["savedmodel_signature"] = _signature_call(saved, examples)
    with contextlib.ExitStack() as stack:
        sessions, unavailable = session_timers(conversion.network, serving_dir, examples, dense, categorical,
                                               work / zoo_run.model / "c_api", stack)  # fmt: skip
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
    from torchtfx.components.torch_trainer.modeling.factory import ZOO
    from torchtfx.data.config.dataset import load_dataset_config
    from torchtfx.data.sources import default_data_dir
    from torchtfx.pipeline.model_choice import choose_model

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
        hparams = choose_model(dataset, TrainerHParams(), model)  # what `torchtfx run --model` trained
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
