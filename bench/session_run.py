"""A SavedModel signature timed through TensorFlow's C API, the way TF Serving runs it.

TF Serving loads a SavedModel with ``LoadSavedModel`` into a ``Session`` and answers each request with
``Session::Run`` from C++; ``TF_LoadSessionFromSavedModel`` and ``TF_SessionRun`` are the same calls. From
Python, every TF call pays a floor of its own: on this 2-core machine 0.13-0.24 ms for a ConcreteFunction
that only doubles its input, and 0.149 ms for ``Session.make_callable`` on ``x * 2``, more than PyTorch
eager's whole batch-1 call of the taxi MLP (0.117 ms). ``session_run.c`` is compiled here against the
installed TensorFlow's headers and libraries and kept running, one process per SavedModel, so that its
rounds interleave with the Python runtimes' (see ``serving_bench.interleaved_latency_ms``).
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("session_run.c")
NETWORK_SIGNATURE = "serving_default"
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
    command = [compiler, "-O2", "-o", str(binary), str(SOURCE), f"-I{tf.sysconfig.get_include()}", f"-L{lib}",
               "-l:libtensorflow_cc.so.2", "-l:libtensorflow_framework.so.2", f"-Wl,-rpath,{lib}"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SessionRunUnavailable(f"compiling {SOURCE.name} failed: {done.stderr.strip()[-600:]}")
    return binary


def save_network(network, dense_width: int, categorical_width: int, out_dir: Path) -> Path:
    """The converted network alone as a SavedModel: ``serving_default(dense, categorical) -> output``."""
    import tensorflow as tf

    specs = [tf.TensorSpec([None, dense_width], tf.float32, name="dense"),
             tf.TensorSpec([None, categorical_width], tf.int64, name="categorical")]  # fmt: skip
    module = tf.Module()
    module.network = network
    module.serve = tf.function(lambda d, c: {"output": network(d, c)[0]}, input_signature=specs, autograph=False)
    tf.saved_model.save(module, str(out_dir), signatures={NETWORK_SIGNATURE: module.serve.get_concrete_function()})
    return out_dir


def _signature_tensors(export_dir: Path, signature: str) -> tuple[dict[str, str], list[str]]:
    """(input name -> graph tensor, output graph tensors in name order) of a saved signature."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((export_dir / "saved_model.pb").read_bytes())
    found = saved.meta_graphs[0].signature_def[signature]
    return {k: v.name for k, v in found.inputs.items()}, [found.outputs[k].name for k in sorted(found.outputs)]


def _write_rows(values, path: Path) -> str:
    """The feed file for ``values`` (numpy array, or list of bytes); returns its DTYPE argument."""
    if isinstance(values, np.ndarray):
        np.ascontiguousarray(values).tofile(path)
        return _DTYPES[values.dtype]
    path.write_bytes(b"".join(struct.pack("=I", len(v)) + v for v in values))
    return "str"


class SessionRun:
    """One SavedModel signature kept loaded in a ``session_run`` process; :meth:`timer` gives a timer over
    its first ``batch`` rows for ``interleaved_latency_ms``."""

    def __init__(self, binary: Path, export_dir: Path, feeds: dict[str, object], work: Path, threads: int,
                 signature: str = NETWORK_SIGNATURE) -> None:  # fmt: skip
        import tensorflow as tf

        inputs, outputs = _signature_tensors(export_dir, signature)
        config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads)
        args = [str(binary), str(export_dir), config.SerializeToString().hex(), outputs[0], str(len(feeds))]
        work.mkdir(parents=True, exist_ok=True)
        for name, values in feeds.items():
            path = work / f"{name}.rows"
            dtype = _write_rows(values, path)
            columns = values.shape[1] if isinstance(values, np.ndarray) and values.ndim == 2 else 0
            args += [inputs[name], dtype, str(columns), str(path)]
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        self._process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True, env=env)  # fmt: skip

    def times(self, batch: int, seconds: float, min_calls: int) -> list[float]:
        """Milliseconds of each timed ``TF_SessionRun`` on the first ``batch`` rows."""
        self._process.stdin.write(f"{batch} {seconds} {min_calls}\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise SessionRunUnavailable(f"session_run stopped: {self._process.stderr.read().strip()[-600:]}")
        return [float(t) for t in line.split()]

    def timer(self, batch: int) -> Callable[[float, int], list[float]]:
        return lambda seconds, min_calls: self.times(batch, seconds, min_calls)

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.stdin.close()
            self._process.wait(timeout=60)

    def __enter__(self) -> SessionRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def session_runs(network, saved_model_dir: Path, examples: Sequence[bytes], dense: np.ndarray,
                 categorical: np.ndarray, work: Path, threads: int) -> dict[str, SessionRun]:  # fmt: skip
    """``tf_session_floor``, ``converted_network_session`` (the network alone, on transformed rows) and
    ``savedmodel_signature_session`` (the pushed model's ``serving_default`` on raw tf.Examples)."""
    from torchtfx.components.torch_trainer.export.convert import EXAMPLES_INPUT, SERVING_SIGNATURE

    binary = build(work)
    widths = dense.shape[1], categorical.shape[1]
    network_dir = save_network(network, *widths, work / "network_savedmodel")
    floor_dir = save_network(lambda d, c: [d * 2.0], *widths, work / "floor_savedmodel")
    network_feeds = {"dense": dense, "categorical": categorical}
    return {
        # What any graph costs per Session::Run here, whatever it computes: one that doubles ``dense``.
        "tf_session_floor": SessionRun(binary, floor_dir, network_feeds, work / "floor_rows", threads),
        "converted_network_session": SessionRun(
            binary, network_dir, network_feeds, work / "network_rows", threads
        ),
        "savedmodel_signature_session": SessionRun(
            binary, saved_model_dir, {EXAMPLES_INPUT: list(examples)}, work / "signature_rows", threads,
            SERVING_SIGNATURE,
        ),
    }  # fmt: skip
