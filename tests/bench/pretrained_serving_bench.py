"""Serving latency of a pretrained text model (issue 43): raw text in, probabilities out, at batch 1, 32, 256 and
texts of 16 and 128 WordPiece tokens ([CLS] and [SEP] included).

The model is ``movie_reviews_minilm``'s (all-MiniLM-L6-v2 fine-tuned by ``torchtfx run``): the pipeline run of
``pretrained_finetune`` (:func:`tests.bench.pretrained_finetune_bench.minilm_root`), run here when absent. Then, in a
child process (``MEASURE_ENV``: PyTorch's OpenMP threads sleep while they wait), on the eval split's reviews cut to
exactly ``length`` tokens (a shorter review repeated first), every runtime with the machine's cores:

- ``savedmodel_signature_session``: the pushed SavedModel's ``serving_default`` on serialized tf.Examples, run by
  ``TF_SessionRun`` from C as TF Serving runs it: parse, the WordPiece tokenizer in core TF ops, the encoder, the
  head's probability (``savedmodel_signature``: the same signature called from Python);
- ``hf_onnxruntime``: ``tokenizers`` (the checkpoint's tokenizer.json, truncated at ``max_length``, padded to the
  batch's longest text) on the raw strings, then onnxruntime on the Trainer's model.onnx (the same network);
- ``hf_torch``: the same ``tokenizers`` call, then PyTorch eager on the trained weights (``eval()``, inference mode).

The two Hugging Face paths also look up each categorical feature's id in a Python dict built from Transform's own
vocabulary. Targets at every batch and length: ours ≤ 1.2x ``hf_onnxruntime`` and ≤ 1x ``hf_torch``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.bench import pipelines
from tests.bench.pretrained_inputs import HuggingFacePath, cut_examples, raw_rows, untruncated, vocabularies
from tests.bench.sequence_serving_bench import MEASURE_ENV, latest_model
from tests.bench.serving_bench import _eval_rows, concrete_call, interleaved_latency_ms, ratios

logger = logging.getLogger(__name__)

DATASET = "movie_reviews_minilm"
BATCH_SIZES = (1, 32, 256)
LENGTHS = (16, 128)
TARGET_VS_ONNXRUNTIME, TARGET_VS_TORCH = 1.2, 1.0
SECONDS, ROUNDS = 3.0, 10  # as sequence_serving_bench: the load on the shared cores swings within a run
# Timed calls per runtime and point: one per round. A call at batch 256 x 128 tokens took 7.5-8 s here (1-minute
# load ~2); at serving_bench's 20 that one point alone ran past 12 minutes.
MIN_CALLS = ROUNDS
OURS, OURS_PYTHON, HF_ORT, HF_TORCH = (
    "savedmodel_signature_session",
    "savedmodel_signature",
    "hf_onnxruntime",
    "hf_torch",
)
# Where ours loses, not judged: the network alone on ids already made by `tokenizers`, converted (TF) and in
# onnxruntime. Their ratio is what TF's kernels cost against onnxruntime's, the tokenizer and parse left out.
NETWORK, ORT_NETWORK = "converted_network", "onnxruntime_network"
RUNTIME_LABELS = {
    OURS: "our served signature, `TF_SessionRun` from C (tf.Examples in: parse, WordPiece in the graph, encoder, head)",
    OURS_PYTHON: "the same signature called from Python (for reference, not judged)",
    HF_ORT: "`tokenizers` + onnxruntime on model.onnx (raw strings in)",
    HF_TORCH: "`tokenizers` + PyTorch eager (raw strings in)",
    NETWORK: "the converted network alone, called from Python, on `tokenizers`' ids (not judged: the kernels' share)",
    ORT_NETWORK: "onnxruntime alone on the same ids (not judged)",
}


def judge(by_length: dict[str, dict], runtime: str) -> dict[str, bool]:
    """Ratios ours / each Hugging Face path per batch, stored in ``by_length``; whether every one meets its
    target."""
    verdict = {"vs_onnxruntime": True, "vs_torch": True}
    for found in by_length.values():
        for key, other, target in (
            ("vs_onnxruntime", HF_ORT, TARGET_VS_ONNXRUNTIME),
            ("vs_torch", HF_TORCH, TARGET_VS_TORCH),
        ):
            found[key] = ratios(found["latency"], runtime, other)
            verdict[key] = verdict[key] and bool(found[key]) and max(found[key].values()) <= target
    return verdict


def _runtimes(saved, network, export_dir: Path, layout, model_config, path: HuggingFacePath, threads: int) -> dict:
    """name -> ``call(examples tensor, texts, categorical values, network inputs)``: the Python-called runtimes
    (the network inputs: ``path.inputs`` of the texts, made before the network-alone runtimes are timed)."""
    import onnxruntime as ort
    import torch

    from tests.bench import session_run
    from tests.bench.sequence_serving_bench import torch_model
    from torchtfx.components.shared import contracts
    from torchtfx.components.shared.served_interface import EXAMPLES_INPUT, PROBABILITIES_OUTPUT, SERVING_SIGNATURE

    torch.set_num_threads(threads)
    serve = saved.signatures[SERVING_SIGNATURE]
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(export_dir / contracts.ONNX_FILE), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    net = torch_model(export_dir, layout, model_config)

    def torch_call(texts: list[str], categorical: list[tuple]) -> object:
        inputs = path.inputs(texts, categorical)
        with torch.inference_mode():
            return net(*map(torch.from_numpy, inputs)).numpy()

    shapes = (np.zeros([0, len(layout.dense)], np.float32), np.zeros([0, len(layout.embedded)], np.int64))
    shapes += tuple(np.zeros([0, 1], np.int64) for _ in layout.sequences)
    network_fn = concrete_call(network, session_run.input_specs(_feeds(names, shapes), layout.sequences))
    return {
        OURS_PYTHON: lambda ex, texts, cat, arrays: serve(**{EXAMPLES_INPUT: ex})[PROBABILITIES_OUTPUT],
        HF_ORT: lambda ex, texts, cat, arrays: session.run(None, _feeds(names, path.inputs(texts, cat)))[0],
        HF_TORCH: lambda ex, texts, cat, arrays: torch_call(texts, cat),
        NETWORK: lambda ex, texts, cat, arrays: network_fn(*arrays),
        ORT_NETWORK: lambda ex, texts, cat, arrays: session.run(None, _feeds(names, arrays))[0],
    }


def _feeds(names: list[str], arrays: tuple) -> dict:
    return dict(zip(names, arrays, strict=True))


def _max_abs_diff_vs_torch(runtimes: dict, args: tuple) -> dict[str, float]:
    """Each runtime's probabilities against ``hf_torch``'s on one batch (``args``: a runtime's call arguments):
    the timed calls compute the same thing (the network alone: its output, the head's probability)."""
    reference = np.asarray(runtimes[HF_TORCH](*args)).reshape(-1)
    return {
        name: float(np.max(np.abs(np.asarray(runtimes[name](*args)).reshape(-1) - reference)))
        for name in (OURS_PYTHON, HF_ORT, NETWORK, ORT_NETWORK)
    }


def _measure_length(runtimes: dict, examples: list[bytes], rows: tuple, session, timing: tuple) -> dict:
    """Every runtime at each batch of ``timing`` (batch sizes, seconds, rounds), interleaved; ``rows``: (texts,
    categorical values, :class:`HuggingFacePath`)."""
    import tensorflow as tf

    texts, categorical, path = rows
    latency: dict[str, dict] = {}
    load = [os.getloadavg()[0]]
    batch_sizes, seconds, rounds = timing
    for batch in batch_sizes:
        args = (tf.constant(examples[:batch]), texts[:batch], categorical[:batch])
        args += (path.inputs(*args[1:]),)
        calls = {n: functools.partial(fn, *args) for n, fn in runtimes.items()}
        timers = {OURS: session.timer(batch)} if session is not None else {}
        for name, found in interleaved_latency_ms(calls, timers, seconds, rounds, MIN_CALLS).items():
            latency.setdefault(name, {})[str(batch)] = found
            logger.info("serving_pretrained %s batch %s: %.3f ms", name, batch, found["median_ms"])
        load.append(os.getloadavg()[0])
    diff = _max_abs_diff_vs_torch(
        runtimes, (tf.constant(examples), texts, categorical, path.inputs(texts, categorical))
    )
    return {"latency": latency, "load_average_1min": load, "max_abs_diff_vs_torch": diff}


def _served_lengths(saved, examples: list[bytes], layout, padding_id: int) -> list[int]:
    """How many ids the served graph's tokenizer gives each example's text (Transform's own signature)."""
    import tensorflow as tf

    from torchtfx.components.shared.served_interface import EXAMPLES_INPUT, TRANSFORM_SIGNATURE

    ids = saved.signatures[TRANSFORM_SIGNATURE](**{EXAMPLES_INPUT: tf.constant(examples)})[layout.sequences[0]]
    return sorted(set(np.count_nonzero(ids.numpy() != padding_id, axis=1).tolist()))


def _c_binary(work: Path) -> tuple[Path | None, str | None]:
    from tests.bench import session_run

    try:
        return session_run.build(work), None
    except session_run.SessionRunUnavailable as err:
        logger.warning("TF C API timings left out: %s", err)
        return None, str(err)


def _model(root: Path):
    """(model uri, export dir, serving dir, layout, the text's SequenceInput) of ``root``'s latest Trainer model."""
    from torchtfx.components.shared import contracts
    from torchtfx.components.torch_trainer.modeling.features import FeatureLayout

    model_uri = latest_model(root)
    export_dir = contracts.export_dir(model_uri)
    layout = FeatureLayout.from_json((export_dir / contracts.LAYOUT_FILE).read_text())
    sequences = layout.model_spec().sequences
    if layout.dense or len(sequences) != 1 or sequences[0].checkpoint is None:
        raise RuntimeError(f"{model_uri}: expected one pretrained text feature and no dense ones, as {DATASET}'s")
    return model_uri, export_dir, model_uri / contracts.SERVING_MODEL_SUBDIR, layout, sequences[0]


def measure(root: Path, work: Path, timing: tuple = (BATCH_SIZES, SECONDS, ROUNDS)) -> dict:
    """The runtimes timed on ``root``'s latest Trainer model (in the process ``MEASURE_ENV`` describes); ``timing``:
    (batch sizes, seconds per runtime and point, rounds)."""
    import tensorflow as tf

    from tests.bench import session_run
    from torchtfx.components.shared import contracts
    from torchtfx.components.shared.served_interface import EXAMPLES_INPUT, SERVING_SIGNATURE
    from torchtfx.components.torch_trainer.savedmodel.convert import convert_onnx
    from torchtfx.data.config.dataset import TRANSFORMED_SUFFIX, load_dataset_config
    from torchtfx.data.pretrained.checkpoint import TOKENIZER_FILE, resolve_checkpoint

    threads, dataset = os.cpu_count() or 1, load_dataset_config(DATASET)
    model_uri, export_dir, serving_dir, layout, text = _model(root)
    text_key, raw_keys = (
        text.name.removesuffix(TRANSFORMED_SUFFIX),
        [k.removesuffix(TRANSFORMED_SUFFIX) for k in layout.embedded],
    )
    tokenizer_file = resolve_checkpoint(text.checkpoint) / TOKENIZER_FILE
    saved, raw = tf.saved_model.load(str(serving_dir)), _eval_rows(pipelines.eval_examples_dir(root), 10**9)
    path = HuggingFacePath(tokenizer_file, text.max_length, text.padding_id, vocabularies(saved, raw, layout, raw_keys))
    network = convert_onnx(export_dir / contracts.ONNX_FILE, work / "pretrained_convert").network
    runtimes = _runtimes(saved, network, export_dir, layout, dataset.model, path, threads)
    binary, unavailable = _c_binary(work)
    by_length, served_lengths = {}, {}
    for length in LENGTHS:
        examples = cut_examples(raw, text_key, untruncated(tokenizer_file), length, max(timing[0]))
        served_lengths[str(length)] = _served_lengths(saved, examples, layout, text.padding_id)
        if served_lengths[str(length)] != [length]:  # the served graph's tokenizer is checked id for id by parity
            raise RuntimeError(f"the served graph reads texts cut to {length} tokens as {served_lengths[str(length)]}")
        with contextlib.ExitStack() as stack:
            session = binary and stack.enter_context(
                session_run.SessionRun(
                    binary, serving_dir, {EXAMPLES_INPUT: examples}, work / str(length), threads, SERVING_SIGNATURE
                )
            )
            rows = (*raw_rows(examples, text_key, raw_keys), path)
            by_length[str(length)] = _measure_length(runtimes, examples, rows, session or None, timing)
    runtime = OURS if binary else OURS_PYTHON
    return {
        "dataset": DATASET,
        "model": dataset.model.factory,
        "checkpoint": text.checkpoint,
        "model_uri": str(model_uri),
        "threads": threads,
        "eval_rows": len(raw),
        "batch_sizes": list(timing[0]),
        "lengths": list(LENGTHS),
        "served_token_counts": served_lengths,  # the ids the served graph reads per cut text: [length] each
        "c_api_unavailable": unavailable,
        "target_runtime": runtime,
        "runtimes": RUNTIME_LABELS,
        "measure_env": MEASURE_ENV,
        "rounds": timing[2],
        "seconds_per_runtime": timing[1],
        "min_calls": MIN_CALLS,
        "by_length": by_length,
        "met": judge(by_length, runtime),
        "targets": {"vs_onnxruntime": TARGET_VS_ONNXRUNTIME, "vs_torch": TARGET_VS_TORCH},
    }


def pretrained_serving(work: Path, beam_workers: int, seconds: float = SECONDS, rounds: int = ROUNDS) -> dict:
    """``bench --only serving_pretrained``: the MiniLM run (:func:`minilm_root`), then :func:`measure` in a child
    process whose environment holds ``MEASURE_ENV`` (libgomp reads it once, when torch is loaded)."""
    from tests.bench.pretrained_finetune_bench import minilm_root

    root, out = minilm_root(work, beam_workers), work / "serving_pretrained_measured.json"
    out.unlink(missing_ok=True)
    command = [sys.executable, "-m", "tests.bench.pretrained_serving_bench", "--root", str(root), "--work"]
    command += [str(work / "serving_pretrained"), "--out", str(out), "--seconds", str(seconds), "--rounds", str(rounds)]
    env = {**os.environ, **MEASURE_ENV, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, env=env, cwd=Path(__file__).resolve().parents[2])  # the repo root
    if done.returncode or not out.is_file():
        raise RuntimeError(f"the serving_pretrained measurement failed (exit code {done.returncode}); its log is above")
    return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="the serving_pretrained measurement (run by `python -m tests.bench`)")
    parser.add_argument("--root", type=Path, required=True, help="a movie_reviews_minilm pipeline root")
    parser.add_argument("--work", type=Path, required=True, help="scratch: the C harness and its feeds")
    parser.add_argument("--out", type=Path, required=True, help="where the result JSON goes")
    parser.add_argument("--seconds", type=float, default=SECONDS, help="per runtime, batch and length")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=list(BATCH_SIZES), help="a check: fewer")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args.out.write_text(
        json.dumps(measure(args.root, args.work, (tuple(args.batch_sizes), args.seconds, args.rounds)), default=float)
    )


if __name__ == "__main__":
    main()
