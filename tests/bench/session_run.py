"""A SavedModel signature timed through TensorFlow's C API, the way TF Serving runs it.

TF Serving loads a SavedModel with ``LoadSavedModel`` into a ``Session`` and answers each request with
``Session::Run`` from C++; ``TF_LoadSessionFromSavedModel`` and ``TF_SessionRun`` are the same calls. From
Python, every TF call pays a floor of its own: on this 2-core machine 0.13-0.24 ms for a ConcreteFunction
that only doubles its input, and 0.149 ms for ``Session.make_callable`` on ``x * 2``, more than PyTorch
eager's whole batch-1 call of the taxi MLP (0.117 ms). ``session_run.c`` is compiled here against the
installed TensorFlow's headers and libraries and kept running, one process per SavedModel, so that its
rounds interleave with the Python runtimes' (see ``serving_bench.interleaved_latency_ms``). It feeds any number
of float32, int64 and string inputs: the tabular network's ``dense`` and ``categorical``, a text model's token ids
``[batch, length]`` after them, or serialized tf.Examples.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import struct
import subprocess
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

import numpy as np

from torchtfx.components.shared.served_interface import SERVING_SIGNATURE

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("session_run.c")
NETWORK_SIGNATURE = SERVING_SIGNATURE  # the network alone is saved under the served model's signature name
_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.int64): "i64"}


class SessionRunUnavailable(RuntimeError):
    """The C harness could not be built or started here; the benchmark reports why and goes on."""


def build(work: Path) -> Path:
    """``session_run.c`` compiled against the installed TensorFlow (a few seconds); the binary's path."""
    import tensorflow as tf

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SessionRunUnavailable("no C compiler (cc or gcc) on PATH: install one (e.g. apt install gcc)")
    lib = Path(tf.sysconfig.get_lib())
    binary = work / "session_run"
    work.mkdir(parents=True, exist_ok=True)
    command = [
        compiler,
        "-O2",
        "-o",
        str(binary),
        str(SOURCE),
        f"-I{tf.sysconfig.get_include()}",
        f"-L{lib}",
        "-l:libtensorflow_cc.so.2",
        "-l:libtensorflow_framework.so.2",
        f"-Wl,-rpath,{lib}",
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SessionRunUnavailable(f"compiling {SOURCE.name} failed: {done.stderr.strip()[-600:]}")
    return binary


def input_specs(feeds: Mapping[str, np.ndarray], any_length: Collection[str] = ()) -> list:
    """One ``tf.TensorSpec`` per feed, named and ordered as ``feeds`` (the network's ``forward`` order): ``[None,
    width]``, or ``[None, None]`` for the ``any_length`` feeds (token ids: one graph serves every length)."""
    import tensorflow as tf

    return [
        tf.TensorSpec([None, None if name in any_length else values.shape[1]], tf.as_dtype(values.dtype), name=name)
        for name, values in feeds.items()
    ]


def save_network(network, specs: Sequence, out_dir: Path) -> Path:
    """The converted network alone as a SavedModel: ``serving_default(<one input per spec>) -> output``."""
    import tensorflow as tf

    module = tf.Module()
    module.network = network
    module.serve = tf.function(
        lambda *inputs: {"output": network(*inputs)[0]}, input_signature=list(specs), autograph=False
    )
    tf.saved_model.save(module, str(out_dir), signatures={NETWORK_SIGNATURE: module.serve.get_concrete_function()})
    return out_dir


def floor_network(*inputs):
    """What any graph costs per call with these inputs, whatever it computes: one that doubles its first input."""
    import tensorflow as tf

    return [tf.cast(inputs[0], tf.float32) * 2.0]


def _signature_tensors(export_dir: Path, signature: str) -> tuple[dict[str, str], list[str]]:
    """(input name -> graph tensor, output graph tensors in name order) of a saved signature."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((export_dir / "saved_model.pb").read_bytes())
    found = saved.meta_graphs[0].signature_def[signature]
    return {k: v.name for k, v in found.inputs.items()}, [found.outputs[k].name for k in sorted(found.outputs)]


def signature_inputs(saved_model_dir: Path, signature: str = NETWORK_SIGNATURE) -> list[str]:
    """A saved signature's input names (the keys it is fed by), sorted: ``["examples"]`` for a tf.Example one."""
    return sorted(_signature_tensors(saved_model_dir, signature)[0])


def _write_rows(values, path: Path) -> str:
    """The feed file for ``values`` (numpy array, or list of bytes); returns its DTYPE argument."""
    if isinstance(values, np.ndarray):
        np.ascontiguousarray(values).tofile(path)
        return _DTYPES[values.dtype]
    path.write_bytes(b"".join(struct.pack("=I", len(v)) + v for v in values))
    return "str"


class TimerProcess:
    """A process kept running that answers each ``"BATCH SECONDS MIN_CALLS"`` line on its stdin with the
    milliseconds of each timed call on one line (``session_run.c``'s protocol); :meth:`timer` gives a timer over its
    first ``batch`` rows for ``interleaved_latency_ms``."""

    def __init__(self, args: list[str], env: Mapping[str, str], name: str) -> None:
        self._name = name
        self._process = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(env)
        )

    def times(self, batch: int, seconds: float, min_calls: int) -> list[float]:
        """Milliseconds of each timed call on the first ``batch`` rows."""
        self._process.stdin.write(f"{batch} {seconds} {min_calls}\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise SessionRunUnavailable(f"{self._name} stopped: {self._process.stderr.read().strip()[-600:]}")
        return [float(t) for t in line.split()]

    def timer(self, batch: int) -> Callable[[float, int], list[float]]:
        return lambda seconds, min_calls: self.times(batch, seconds, min_calls)

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.stdin.close()
            self._process.wait(timeout=60)

    def __enter__(self) -> TimerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SessionRun(TimerProcess):
    """One SavedModel signature kept loaded in a ``session_run`` process. ``env``: the process's extra environment
    (e.g. ``TF_ENABLE_ONEDNN_OPTS=0``: TensorFlow's own kernels instead of its oneDNN rewrites)."""

    def __init__(
        self,
        binary: Path,
        export_dir: Path,
        feeds: dict[str, object],
        work: Path,
        threads: int,
        signature: str = NETWORK_SIGNATURE,
        env: Mapping[str, str] | None = None,
    ) -> None:
        import tensorflow as tf

        inputs, outputs = _signature_tensors(export_dir, signature)
        config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads)
        args = [str(binary), str(export_dir), config.SerializeToString().hex(), outputs[0], str(len(feeds))]
        work.mkdir(parents=True, exist_ok=True)
        for name, values in feeds.items():
            path = work / f"{name}.rows"
            dtype = _write_rows(values, path)
            columns = values.shape[1] if isinstance(values, np.ndarray) and values.ndim == 2 else -1
            args += [inputs[name], dtype, str(columns), str(path)]
        super().__init__(args, {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}, "session_run")


@dataclasses.dataclass(frozen=True)
class SavedGraphs:
    """The harness and the two network SavedModels that :func:`session_runs` times, built once per network."""

    binary: Path
    network_dir: Path
    floor_dir: Path


def save_graphs(network, specs: Sequence, work: Path) -> SavedGraphs:
    """``session_run`` compiled, the network and the floor saved with ``specs`` (see :func:`input_specs`)."""
    binary = build(work)
    return SavedGraphs(
        binary,
        save_network(network, specs, work / "network_savedmodel"),
        save_network(floor_network, specs, work / "floor_savedmodel"),
    )


def session_runs(
    graphs: SavedGraphs,
    saved_model_dir: Path,
    examples: Sequence[bytes],
    feeds: Mapping[str, np.ndarray],
    work: Path,
    threads: int,
) -> dict[str, SessionRun]:
    """``tf_session_floor``, ``converted_network_session`` (the network alone on ``feeds``, its inputs by name)
    and ``savedmodel_signature_session`` (the pushed model's ``serving_default`` on raw tf.Examples)."""
    from torchtfx.components.shared.served_interface import EXAMPLES_INPUT, SERVING_SIGNATURE

    return {
        # What any graph costs per Session::Run here, whatever it computes: one that doubles the first input.
        "tf_session_floor": SessionRun(graphs.binary, graphs.floor_dir, feeds, work / "floor_rows", threads),
        "converted_network_session": SessionRun(
            graphs.binary, graphs.network_dir, feeds, work / "network_rows", threads
        ),
        "savedmodel_signature_session": SessionRun(
            graphs.binary,
            saved_model_dir,
            {EXAMPLES_INPUT: list(examples)},
            work / "signature_rows",
            threads,
            SERVING_SIGNATURE,
        ),
    }


def _op_type(label: str) -> str:
    """The op type in a step-stats timeline label, ``"<node> = <Op>(<inputs>)"``."""
    _, _, call = label.partition(" = ")
    return call.split("(", 1)[0] or "?"


def _shape(node) -> list[int]:
    return [d.size for d in node.output[0].tensor_description.shape.dim] if node.output else []


def op_profile(
    saved_model_dir: Path, feeds: Mapping[str, np.ndarray], threads: int, calls: int = 20, top_nodes: int = 8
) -> dict:
    """Where a signature's time goes under ``Session::Run`` (TF Serving's call, in this process's DirectSession,
    with the graph optimizations TF Serving gets): per op type, the milliseconds per call summed over its nodes
    and the node count; the ``top_nodes`` slowest nodes with their first output's shape; from the step stats of
    ``calls`` fully traced runs after 3 warm-ups. Tracing adds its own overhead to every node, so read the figures
    as shares; ``wall_ms``: the median traced call."""
    import collections
    import statistics
    import time

    import tensorflow as tf

    inputs, outputs = _signature_tensors(saved_model_dir, NETWORK_SIGNATURE)
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads)
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    node_micros: collections.Counter = collections.Counter()
    node_info: dict[str, tuple[str, list[int]]] = {}
    walls = []
    with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph, config=config) as session:
        level = tf.get_logger().level
        tf.get_logger().setLevel("ERROR")  # the v1 loader's deprecation notice: it is the loader TF Serving uses
        try:
            tf.compat.v1.saved_model.load(session, ["serve"], str(saved_model_dir))
        finally:
            tf.get_logger().setLevel(level)
        feed_dict = {inputs[name]: values for name, values in feeds.items()}
        for call in range(-3, calls):
            metadata = tf.compat.v1.RunMetadata()
            tick = time.perf_counter()
            session.run(outputs[0], feed_dict, options=options, run_metadata=metadata)
            if call < 0:
                continue
            walls.append((time.perf_counter() - tick) * 1e3)
            for device in metadata.step_stats.dev_stats:
                for node in device.node_stats:
                    if node.node_name not in ("_SOURCE", "_SINK") and node.timeline_label:
                        node_micros[node.node_name] += node.all_end_rel_micros
                        node_info[node.node_name] = (_op_type(node.timeline_label), _shape(node))
    ops: dict[str, dict] = collections.defaultdict(lambda: {"ms_per_call": 0.0, "nodes": 0})
    for name, micros in node_micros.items():
        ops[node_info[name][0]]["ms_per_call"] += micros / calls / 1e3
        ops[node_info[name][0]]["nodes"] += 1
    slowest = [
        {"node": name, "op": node_info[name][0], "shape": node_info[name][1], "ms_per_call": micros / calls / 1e3}
        for name, micros in node_micros.most_common(top_nodes)
    ]
    return {
        "wall_ms": statistics.median(walls),
        "nodes": len(node_micros),
        "top_nodes": slowest,
        "ops": dict(sorted(ops.items(), key=lambda kv: -kv[1]["ms_per_call"])),
    }
