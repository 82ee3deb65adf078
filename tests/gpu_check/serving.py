"""The TensorFlow items, on the GPU TensorFlow sees: the FP16 variant's drift gate (TF-TRT, and the float16 network
served where TensorRT is missing), the MoE routing flip rate, and the FP32 serving SavedModel on the GPU against
the CPU. Each returns (status, detail) for tests/gpu_check/runner.py."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tensorflow as tf
import torch
from tensorflow.core.protobuf import saved_model_pb2

from tests.gpu_check.training import tiny_taxi
from tests.paths import PROJECT_ROOT
from tests.unit.components.torch_trainer.served_models import export_and_serve, train_briefly
from torchtfx.components.shared.served_interface import EXAMPLES_INPUT, SERVING_SIGNATURE, prediction_output
from torchtfx.components.torch_trainer.handoff.materialize import example_batches
from torchtfx.components.torch_trainer.modeling.factory import build_model
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.modeling.zoo import text_moe
from torchtfx.components.torch_trainer.savedmodel import precision
from torchtfx.components.torch_trainer.savedmodel.convert import build_serving_model
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import export_onnx
from torchtfx.data.config.model import ModelConfig
from torchtfx.data.config.serving_precision import DriftLimits

PASS, FAIL = "PASS", "FAIL"
GPU = "/GPU:0"
PARITY_TOLERANCE = 1e-5  # the Trainer's own parity gate (ONNX vs torch, SavedModel vs ONNX)
LIMITS = DriftLimits()


def _on_gpu(run: Callable):
    """``run()`` under ``tf.device(GPU)``, and the GPU memory it peaked at (0: nothing ran on the GPU)."""
    tf.config.experimental.reset_memory_stats("GPU:0")
    with tf.device(GPU):
        value = run()
    return value, tf.config.experimental.get_memory_info("GPU:0")["peak"]


def _mlp_serving(work: Path):
    """The unit tests' tiny taxi, the zoo MLP trained a few steps (on the CPU) and its FP32 serving SavedModel in
    ``work / "fp32"`` (ONNX in ``work / "model.onnx"``), as test_precision builds them."""
    tiny = tiny_taxi(work)
    torch.manual_seed(0)
    model = train_briefly(build_model(ModelConfig(), tiny.layout.model_spec()), tiny)
    export_and_serve(tiny, model, work / "model.onnx", work / "fp32")
    return tiny


def _drift(tiny, work: Path, method: str):
    return precision.measure_drift(
        str(work / "fp32"), str(work / "fp16"), str(tiny.examples_dir), tiny.layout.task, LIMITS, method
    )


def _engine_ops(saved_dir: Path) -> int:
    """TRTEngineOp nodes in a SavedModel's graph and functions: the segments TF-TRT handed to TensorRT."""
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((saved_dir / "saved_model.pb").read_bytes())
    graph = saved.meta_graphs[0].graph_def
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    return sum(n.op == "TRTEngineOp" for n in nodes)


def tf_trt_fp16(work: Path) -> tuple[str, str]:
    """TF-TRT at FP16 on the network (precision._tf_trt_variant: the path build_reduced_precision_variant takes
    where TensorRT loads, without its fallback), then the drift gate against FP32 on the eval split."""
    tiny = _mlp_serving(work)
    engines: list[int] = []

    def convert(network_dir: str, out_dir: str) -> None:
        precision._tf_trt_fp16(network_dir, out_dir)
        engines.append(_engine_ops(Path(out_dir)))

    precision._tf_trt_variant(work / "model.onnx", tiny.tft_output, tiny.cfg, tiny.layout, work / "fp16", convert)
    report, peak = _on_gpu(lambda: _drift(tiny, work, precision.TF_TRT_METHOD))
    detail = f"{engines[0]} TRTEngineOp(s), GPU peak {peak} bytes; {report.summary()}"
    if not engines[0]:
        return FAIL, f"TF-TRT built no TensorRT engine: every segment stayed in TensorFlow ({detail})"
    return (PASS, detail) if report.passed else (FAIL, detail)


def float16_network(work: Path) -> tuple[str, str]:
    """The float16 network (what build_reduced_precision_variant serves where TF-TRT cannot run) built and judged
    by the drift gate on the GPU."""
    tiny = _mlp_serving(work)
    network, method = precision.reduced_precision_network(work / "model.onnx")
    build_serving_model(network, tiny.tft_output, tiny.cfg, tiny.layout, work / "fp16")
    report, peak = _on_gpu(lambda: _drift(tiny, work, method))
    detail = f"GPU peak {peak} bytes; {report.summary()}"
    if method != "float16 network (GPU)" or not peak:
        return FAIL, f"the float16 network did not run on the GPU ({detail})"
    return (PASS, detail) if report.passed else (FAIL, detail)


def moe_routing(work: Path) -> tuple[str, str]:
    """The routing flip rate (FP32 vs float16 top-k expert choices) on the GPU: the zoo text_moe within the default
    limit, and a router whose two experts float16 cannot tell apart over it (test_routing's near tie)."""
    from tests.unit.components.torch_trainer.savedmodel.test_routing import SPEC, TINY_MOE, _near_tied, _split

    split, limit = _split(), LIMITS.max_routing_flip_rate
    split.save(work / "eval")
    torch.manual_seed(0)
    export_onnx(ExportHead(text_moe.build(SPEC).eval(), "binary"), split, work / "moe.onnx")
    tied = text_moe.build(SPEC, experts=2, top_k=1, **TINY_MOE)
    (moe,) = [m for m in tied.modules() if isinstance(m, text_moe.TopKMoE)]
    _near_tied(moe.router)
    export_onnx(ExportHead(tied.eval(), "binary"), split, work / "tied.onnx")
    zoo, peak = _on_gpu(lambda: precision.routing_drift(work / "moe.onnx", work / "eval"))
    near, _ = _on_gpu(lambda: precision.routing_drift(work / "tied.onnx", work / "eval"))
    if zoo is None or near is None:
        return FAIL, f"no TopK node found to measure (zoo text_moe: {zoo}, near tie: {near})"
    tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
    detail = (
        f"zoo text_moe: {zoo.changed} of {zoo.decisions} choices change ({zoo.rate:.2%}, limit {limit:.2%}); "
        f"near-tied router: {near.changed} of {near.decisions} ({near.rate:.2%}); GPU peak {peak} bytes, TF32 {tf32}"
    )
    problems = [] if zoo.rate <= limit else ["the zoo text_moe's rate is over the limit"]
    problems += [] if near.rate > limit else ["the near-tied router's flips went unseen"]
    problems += [] if peak else ["nothing ran on the GPU"]
    return (FAIL, "; ".join(problems) + f" ({detail})") if problems else (PASS, detail)


def serve_outputs(saved_dir: str, split_uri: str, output: str) -> np.ndarray:
    """A serving SavedModel's ``output`` on every raw example of the split, in batches of 256."""
    model = tf.saved_model.load(saved_dir)
    serve = model.signatures[SERVING_SIGNATURE]
    return np.concatenate([serve(**{EXAMPLES_INPUT: b})[output].numpy() for b in example_batches(split_uri, 256)])


def _cpu_outputs(saved_dir: Path, split_uri: str, output: str, out: Path) -> np.ndarray:
    """serve_outputs in a process where CUDA_VISIBLE_DEVICES hides every GPU: the CPU, whatever the placer does."""
    script = (
        "import numpy as np; from tests.gpu_check.serving import serve_outputs; "
        f"np.save({str(out)!r}, serve_outputs({str(saved_dir)!r}, {split_uri!r}, {output!r}))"
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120, cwd=PROJECT_ROOT
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the CPU run failed: {proc.stderr.strip().splitlines()[-1:]}")
    return np.load(out)


def gpu_cpu_parity(work: Path) -> tuple[str, str]:
    """The FP32 serving SavedModel on the GPU against the same on the CPU, every eval example: with TF32 off within
    PARITY_TOLERANCE; with TF32 on (TensorFlow's default on Ampere and newer, so TF Serving's) reported, and
    within the FP16 drift gate's max |Δ| at most."""
    tiny = _mlp_serving(work)
    output, split = prediction_output(tiny.layout.task), str(tiny.examples_dir)
    cpu = _cpu_outputs(work / "fp32", split, output, work / "cpu.npy")
    tf32_default = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    strict, peak = _on_gpu(lambda: serve_outputs(str(work / "fp32"), split, output))
    tf.config.experimental.enable_tensor_float_32_execution(True)
    tf32, _ = _on_gpu(lambda: serve_outputs(str(work / "fp32"), split, output))
    tf.config.experimental.enable_tensor_float_32_execution(tf32_default)
    diff, diff_tf32 = float(np.max(np.abs(strict - cpu))), float(np.max(np.abs(tf32 - cpu)))
    detail = (
        f"{len(cpu)} examples: max |GPU - CPU| {diff:.3g} with TF32 off (limit {PARITY_TOLERANCE:g}), "
        f"{diff_tf32:.3g} with TF32 on (limit {LIMITS.max_abs_diff:g}; TF's default here: {tf32_default}); "
        f"GPU peak {peak} bytes"
    )
    problems = [] if diff <= PARITY_TOLERANCE else ["over the parity tolerance with TF32 off"]
    problems += [] if diff_tf32 <= LIMITS.max_abs_diff else ["over the drift gate's max |Δ| with TF32 on"]
    problems += [] if peak else ["nothing ran on the GPU"]
    return (FAIL, "; ".join(problems) + f" ({detail})") if problems else (PASS, detail)
