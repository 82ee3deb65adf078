"""Serving latency of one trained model four ways, on the same eval rows, plus conversion time and parity.

1. the pushed SavedModel's ``serving_default`` (raw serialized tf.Examples in: parse + TFT + network);
2. the converted network alone (the translator's, or onnx2tf's, network as one ConcreteFunction with a fixed
   input signature, on transformed tensors);
3. onnxruntime on the exported ONNX graph;
4. PyTorch eager on the trained weights;
and ``tf_call_floor``: a ConcreteFunction that only doubles its dense input, called the same way: what any
TF function costs per call from Python, whatever its graph. TF Serving calls the graph from C++ instead:
``converted_network_session``, ``savedmodel_signature_session`` and ``tf_session_floor`` are the same three
graphs run by ``TF_SessionRun`` from a C process (``tests/bench/session_run.py``), the call TF Serving makes.

Beside them, the reference's whole served signature (issue 29): TFX's native-Keras taxi model, as its Pusher
pushed it, its ``serving_default`` fed the same raw serialized tf.Examples (``reference_signature`` from Python,
``reference_signature_session`` by ``TF_SessionRun``), in the same interleaved rounds; and where each signature's
time goes per op type (:func:`signature_profiles`).

Every runtime gets the same number of intra-op threads (the machine's cores) and the same rows.
"""

from __future__ import annotations

import functools
import logging
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from torchtfx.components.shared.served_interface import SERVING_SIGNATURE
from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout

logger = logging.getLogger(__name__)

BATCH_SIZES = (1, 32, 1024)
_MIN_CALLS, _MIN_SECONDS = 20, 1.5


_ROUNDS = 5


def _timed_calls(call: Callable[[], object], seconds: float, min_calls: int) -> list[float]:
    """Milliseconds of each call, for at least ``seconds`` and ``min_calls``."""
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < min_calls or time.perf_counter() - started < seconds:
        tick = time.perf_counter()
        call()
        times.append((time.perf_counter() - tick) * 1e3)
    return times


def _summary(times: list[float]) -> dict[str, float]:
    times = sorted(times)
    return {"median_ms": statistics.median(times), "p90_ms": times[int(0.9 * (len(times) - 1))], "calls": len(times)}


def latency_ms(call: Callable[[], object]) -> dict[str, float]:
    """Median and p90 milliseconds per call, after warm-up; at least 20 calls and 1.5 s of calls."""
    for _ in range(3):
        call()
    return _summary(_timed_calls(call, _MIN_SECONDS, _MIN_CALLS))


def interleaved_latency_ms(
    calls: dict[str, Callable[[], object]],
    timers: dict[str, Callable[[float, int], list[float]]] | None = None,
    seconds: float = _MIN_SECONDS,
    rounds: int = _ROUNDS,
    min_calls: int = _MIN_CALLS,
) -> dict[str, dict[str, dict[str, float]]]:
    """:func:`latency_ms` of every call, and of every timer (``timer(seconds, min_calls) -> ms per call``,
    e.g. ``session_run.SessionRun.timer``: calls made outside Python), measured in ``rounds`` (5) rounds that
    take turns (each round 1/``rounds`` of the calls and ``seconds`` of each), pooled. On a shared machine a busy
    spell then lands on every runtime alike: measured one after another, one zoo run had torch at 118 ms for a
    batch that takes 1.2 ms, and onnxruntime 6.8 ms for one of 2.5 ms, in the 1.5 s each of them happened to be
    measured.
    More seconds and rounds where the load varies more (``sequence_serving_bench``); fewer ``min_calls`` (20) where
    one call takes seconds (``pretrained_serving_bench``)."""
    for call in calls.values():
        for _ in range(3):
            call()
    every = {**{name: functools.partial(_timed_calls, call) for name, call in calls.items()}, **(timers or {})}
    times: dict[str, list[float]] = {name: [] for name in every}
    for _ in range(rounds):
        for name, timer in every.items():
            times[name] += timer(seconds / rounds, max(1, min_calls // rounds))
    return {name: _summary(found) for name, found in times.items()}


def _eval_rows(raw_eval_dir: Path, rows: int) -> list[bytes]:
    import tensorflow as tf

    from torchtfx.components.torch_trainer.handoff.materialize import split_files

    dataset = tf.data.TFRecordDataset(split_files(str(raw_eval_dir)), compression_type="GZIP").take(rows)
    return [r.numpy() for r in dataset]


def _network_inputs(saved_model, examples: list[bytes], layout: FeatureLayout) -> tuple[np.ndarray, np.ndarray]:
    import tensorflow as tf

    from torchtfx.components.shared.served_interface import EXAMPLES_INPUT, TRANSFORM_SIGNATURE

    transformed = saved_model.signatures[TRANSFORM_SIGNATURE](**{EXAMPLES_INPUT: tf.constant(examples)})
    dense = np.stack([transformed[k].numpy().reshape(-1) for k in layout.dense], axis=1).astype(np.float32)
    categorical = np.stack([transformed[k].numpy().reshape(-1) for k in layout.embedded], axis=1).astype(np.int64)
    return dense, categorical


def concrete_call(network, specs: list) -> Callable:
    """``call(*arrays) -> first output`` of ``network`` as one ConcreteFunction for ``specs`` (``tf.TensorSpec``
    per input, in ``forward``'s order; see :func:`network_call` for why not a ``tf.function``)."""
    import tensorflow as tf

    concrete = tf.function(lambda *inputs: network(*inputs)[0], autograph=False).get_concrete_function(*specs)
    return lambda *arrays: concrete(*map(tf.constant, arrays))


def network_call(network, dense_width: int, categorical_width: int) -> Callable:
    """``call(dense, categorical) -> first output`` of the network as one ConcreteFunction.

    Measured on the taxi MLP (ms per call, batch 1 / 32 / 1024): a ``tf.function`` called with new tensors
    0.349 / 0.412 / 1.288, its ConcreteFunction for ``[None, width]`` inputs 0.217 / 0.263 / 1.109 in the
    same process: the ``tf.function`` binds and hashes its arguments to find its trace on every call.
    ``jit_compile=True`` (XLA) 0.281 / 0.369 / 1.218 through the ``tf.function``, and XLA compiles again
    for every new batch size, so neither the bench nor the served model uses it.
    """
    import tensorflow as tf

    specs = [tf.TensorSpec([None, dense_width], tf.float32), tf.TensorSpec([None, categorical_width], tf.int64)]
    return concrete_call(network, specs)


def call_floor(dense_width: int, categorical_width: int) -> Callable:
    """The Python cost of calling any ConcreteFunction with these inputs: one that doubles ``dense``."""
    return network_call(lambda d, c: [d * 2.0], dense_width, categorical_width)


def _runtimes(export_dir: Path, serving_dir: Path, layout: FeatureLayout, hparams: TrainerHParams, work: Path):
    """(the loaded SavedModel, the converted network, name -> callable(examples, dense, categorical), onnx2tf
    conversion seconds)."""
    import onnxruntime as ort
    import tensorflow as tf
    import torch

    from torchtfx.components.shared import contracts
    from torchtfx.components.shared.served_interface import EXAMPLES_INPUT, SERVING_SIGNATURE
    from torchtfx.components.torch_trainer.modeling.heads import ExportHead
    from torchtfx.components.torch_trainer.savedmodel.convert import convert_onnx
    from torchtfx.components.torch_trainer.savedmodel.trained_model import load_torch_model

    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    saved = tf.saved_model.load(str(serving_dir))
    serve = saved.signatures[SERVING_SIGNATURE]
    tick = time.perf_counter()
    network = convert_onnx(export_dir / contracts.ONNX_FILE, work / "onnx2tf").network
    conversion_seconds = time.perf_counter() - tick
    widths = len(layout.dense), len(layout.embedded)
    network_fn, floor = network_call(network, *widths), call_floor(*widths)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(export_dir / contracts.ONNX_FILE), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    torch_net = ExportHead.for_layout(load_torch_model(export_dir, layout, hparams), layout).eval()

    def torch_call(d, c):
        with torch.inference_mode():
            return torch_net(torch.from_numpy(d), torch.from_numpy(c))

    return (
        saved,
        network,
        {
            "savedmodel_signature": lambda ex, d, c: serve(**{EXAMPLES_INPUT: ex}),
            "converted_network": lambda ex, d, c: network_fn(d, c),
            "tf_call_floor": lambda ex, d, c: floor(d, c),
            "onnxruntime": lambda ex, d, c: session.run(None, {names[0]: d, names[1]: c}),
            "torch": lambda ex, d, c: torch_call(d, c),
        },
        conversion_seconds,
    )


def examples_call(saved_model_dir: Path, signature: str = SERVING_SIGNATURE) -> Callable:
    """``call(examples) -> outputs`` of a SavedModel signature fed serialized tf.Examples by its one input's name
    (``examples`` in ours and in TFX's taxi example, read from the signature rather than assumed)."""
    import tensorflow as tf

    serve = tf.saved_model.load(str(saved_model_dir)).signatures[signature]
    (name,) = serve.structured_input_signature[1]
    return lambda examples: serve(**{name: examples})


def ratios(latency: dict[str, dict[str, dict]], runtime: str, other: str) -> dict[str, float]:
    """Median ``runtime`` ms / median ``other`` ms, per batch size both were measured at."""
    mine, theirs = latency.get(runtime, {}), latency.get(other, {})
    return {batch: mine[batch]["median_ms"] / theirs[batch]["median_ms"] for batch in mine if batch in theirs}


def enter_session_runs(make: Callable[[], dict], stack) -> tuple[dict, str | None]:
    """``make()``'s name -> :class:`tests.bench.session_run.SessionRun`, each closed by ``stack``; or ({}, why) where
    the C harness cannot be built here (the benchmark goes on without the C API runtimes)."""
    from tests.bench import session_run

    try:
        runs = make()
    except session_run.SessionRunUnavailable as err:
        logger.warning("TF C API timings left out: %s", err)
        return {}, str(err)
    for run in runs.values():
        stack.enter_context(run)
    return runs, None


def session_timers(
    network,
    serving_dir: Path,
    examples: list[bytes],
    dense,
    categorical,
    work: Path,
    stack,
    reference_dir: Path | None = None,
):
    """The tabular network's :func:`tests.bench.session_run.session_runs` through :func:`enter_session_runs`; with
    ``reference_dir``, also ``reference_signature_session``: that SavedModel's ``serving_default`` fed
    ``examples`` by its one input (the reference pipeline's pushed model)."""
    from tests.bench import session_run

    def make() -> dict:
        threads = os.cpu_count() or 1
        feeds = {"dense": dense, "categorical": categorical}
        graphs = session_run.save_graphs(network, session_run.input_specs(feeds), work)
        runs = session_run.session_runs(graphs, serving_dir, examples, feeds, work, threads)
        if reference_dir is not None:
            (name,) = session_run.signature_inputs(reference_dir)
            runs["reference_signature_session"] = session_run.SessionRun(
                graphs.binary, reference_dir, {name: list(examples)}, work / "reference_rows", threads
            )
        return runs

    return enter_session_runs(make, stack)


# A served tf.Example signature's stages by op type: parse, function calls (timed whole), the other ops. TF's
# optimizer does not inline TFT's pruned graph function, so in the reference's signature the TFT layer is the one
# StatefulPartitionedCall; ours imports Transform's graph into the signature (savedmodel/convert.py:inlined_transform),
# so its TFT ops are among the other ops, and its one call is the network's row-shard branch (batch >= 256).
STAGE_OPS = {
    "parse": ("ParseExample", "ParseExampleV2", "ParseSingleExample"),
    "tft_layer": ("StatefulPartitionedCall", "PartitionedCall"),
}


def signature_stages(ops: dict[str, dict]) -> dict[str, float]:
    """Milliseconds per call of an op profile's op types by stage: ``parse`` (ParseExample), ``tft_layer`` (the
    function calls: the reference's TFT layer), ``network_and_rest`` (every other op)."""
    stages = dict.fromkeys((*STAGE_OPS, "network_and_rest"), 0.0)
    for op, found in ops.items():
        stage = next((name for name, types in STAGE_OPS.items() if op in types), "network_and_rest")
        stages[stage] += found["ms_per_call"]
    return stages


def top_ops(profile: dict, top: int = 8, nodes: int = 5) -> dict:
    """:func:`tests.bench.session_run.op_profile` cut to its ``top`` op types and ``nodes`` slowest nodes, with every op
    type's milliseconds by :func:`signature_stages`; ``traced_ms_per_call``: all op types' milliseconds summed,
    what the shares are of."""
    total = sum(v["ms_per_call"] for v in profile["ops"].values())
    kept = dict(sorted(profile["ops"].items(), key=lambda kv: -kv[1]["ms_per_call"])[:top])
    return {
        "wall_ms": profile["wall_ms"],
        "nodes": profile["nodes"],
        "traced_ms_per_call": total,
        "ops": kept,
        "stages": signature_stages(profile["ops"]),
        "top_nodes": profile["top_nodes"][:nodes],
    }


def signature_profiles(
    models: dict[str, Path], examples: list[bytes], threads: int, batches: tuple[int, ...] = BATCH_SIZES
) -> dict[str, dict[str, dict]]:
    """name -> batch -> :func:`top_ops` of each SavedModel's ``serving_default`` under ``Session::Run`` (traced),
    fed the first ``batch`` of ``examples``: which op types (ParseExample, TFT's lookups and buckets, the network's
    matmuls) take each signature's time."""
    from tests.bench import session_run

    profiles: dict[str, dict[str, dict]] = {}
    for name, saved_model_dir in models.items():
        (input_name,) = session_run.signature_inputs(saved_model_dir)
        for batch in batches:
            feeds = {input_name: np.array(examples[:batch], dtype=object)}
            found = top_ops(session_run.op_profile(saved_model_dir, feeds, threads))
            profiles.setdefault(name, {})[str(batch)] = found
            logger.info("%s signature batch %s: %.3f ms per traced call", name, batch, found["wall_ms"])
    return profiles


def _timings(runtimes: dict[str, Callable], sessions: dict, examples: list[bytes], dense, categorical) -> dict:
    """runtime -> batch -> :func:`interleaved_latency_ms`'s summary, every runtime and C timer in the same rounds."""
    import tensorflow as tf

    results: dict[str, dict[str, dict]] = {}
    for batch in BATCH_SIZES:
        ex, d, c = tf.constant(examples[:batch]), dense[:batch], categorical[:batch]
        calls = {name: functools.partial(fn, ex, d, c) for name, fn in runtimes.items()}
        timers = {name: run.timer(batch) for name, run in sessions.items()}
        for name, found in interleaved_latency_ms(calls, timers).items():
            results.setdefault(name, {})[str(batch)] = found
            logger.info("serving %s batch %s: %.3f ms", name, batch, found["median_ms"])
    return results


def _against_reference(results: dict, sessions: dict, reference_dir: Path | None) -> dict:
    """Issue 29's comparison: our whole signature / the reference's, per batch, judged (like TF Serving runs
    them) on the ``TF_SessionRun`` timings where the C harness runs, else on the Python calls."""
    if reference_dir is None:
        return {"reference_model_dir": None}
    runtime, other = (
        ("savedmodel_signature_session", "reference_signature_session")
        if sessions
        else ("savedmodel_signature", "reference_signature")
    )
    return {
        "reference_model_dir": str(reference_dir),
        "signature_target_runtime": runtime,
        "signature_vs_reference": ratios(results, runtime, other),
        "target_vs_reference": 1.0,
    }


def serving(
    export_dir: Path,
    serving_dir: Path,
    raw_eval_dir: Path,
    layout: FeatureLayout,
    hparams: TrainerHParams,
    work: Path,
    reference_dir: Path | None = None,
) -> dict:
    """The runtimes' latency at each batch; with ``reference_dir`` (the reference pipeline's pushed SavedModel),
    its whole signature beside ours, on the same rows, and both signatures' op profiles."""
    import contextlib

    saved, network, runtimes, conversion_seconds = _runtimes(export_dir, serving_dir, layout, hparams, work)
    if reference_dir is not None:
        reference = examples_call(reference_dir)
        runtimes["reference_signature"] = lambda ex, d, c: reference(ex)
    examples = _eval_rows(raw_eval_dir, max(BATCH_SIZES))
    dense, categorical = _network_inputs(saved, examples, layout)
    with contextlib.ExitStack() as stack:
        sessions, unavailable = session_timers(
            network, serving_dir, examples, dense, categorical, work / "c_api", stack, reference_dir
        )
        results = _timings(runtimes, sessions, examples, dense, categorical)
    models = {"ours": serving_dir, **({"reference": reference_dir} if reference_dir is not None else {})}
    network_runtime = "converted_network_session" if sessions else "converted_network"
    return {
        "threads": os.cpu_count(),
        "latency": results,
        "c_api_unavailable": unavailable,
        # The targets are judged on the network as TF Serving runs it (Session::Run from C++) where the C
        # harness runs, and on the Python call otherwise.
        "target_runtime": network_runtime,
        "converted_vs_onnxruntime": ratios(results, network_runtime, "onnxruntime"),
        "converted_vs_torch": ratios(results, network_runtime, "torch"),
        "target": 1.5,
        "onnx2tf_conversion_seconds": conversion_seconds,
        "signature_op_profile": signature_profiles(models, examples, os.cpu_count() or 1),
        **_against_reference(results, sessions, reference_dir),
    }
