"""File descriptor 2 through a filter: the lines no logger or warnings filter sees.

TF's C++ logging and the interpreter's teardown of a Beam worker write straight to file descriptor 2, the
worker processes' being the one they inherit from ``torchtfx``. The relay puts a pipe on descriptor 2 and
copies every line to the real stderr, except blocks of consecutive lines listed in HARMLESS_LINES.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable, Iterator

# Each entry: consecutive lines, each containing its text (timestamps, addresses and paths vary).
HARMLESS_LINES: tuple[tuple[str, ...], ...] = (
    # Importing TF 2.16 (this process and each Beam worker): its wheel registers XLA's CUDA plugins from two
    # of its libraries; the second registration is refused and the first stays. Printed on CPU machines too.
    (
        "cuda_fft.cc:479] Unable to register cuFFT factory: Attempting to register factory for plugin cuFFT when "
        "one has already been registered",
    ),
    (
        "cuda_dnn.cc:10575] Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when "
        "one has already been registered",
    ),
    (
        "cuda_blas.cc:1442] Unable to register cuBLAS factory: Attempting to register factory for plugin cuBLAS "
        "when one has already been registered",
    ),
    # Importing TF: no TensorRT in the pinned stack; the fp16 serving variant says itself how it was built.
    ("py_utils.cc:38] TF-TRT Warning: Could not find TensorRT",),
    # TF 2.16's oneDNN kernels on an int64 tensor (the WordPiece graph's ids and offsets, in the Trainer's parity
    # step and each Evaluator worker: 3 lines a pretrained-text run): the default Eigen kernel runs instead;
    # the parity gate compares the very outputs (1.1e-06 on the MiniLM sample).
    ("util.cc:131] oneDNN supports DT_INT64 only on platforms with AVX-512. Falling back to the default Eigen",),
    # The normal end of a tf.data iterator (OUT_OF_RANGE), which TF 2.16 logs as an aborted rendezvous.
    ("local_rendezvous.cc:404] Local rendezvous is aborting with status: OUT_OF_RANGE: End of sequence",),
    # A Beam worker's interpreter teardown (12 per worker in the 1M-row bench run): TF's function objects are
    # collected after the modules their __del__ needs; the worker's results were already sent.
    (
        "Exception ignored in: <function AtomicFunction.__del__ at 0x",
        "Traceback (most recent call last):",
        '/tensorflow/python/eager/polymorphic_function/atomic_function.py", line 291, in __del__',
        "TypeError: 'NoneType' object is not subscriptable",
    ),
)


def filtered(lines: Iterable[bytes], known: tuple[tuple[str, ...], ...] = HARMLESS_LINES) -> Iterator[bytes]:
    """``lines`` less the known blocks; a block's lines are held until it is complete or broken."""
    held: list[bytes] = []
    block: tuple[str, ...] = ()
    for line in lines:
        text = line.decode("utf-8", "replace")
        if held:
            if block[len(held)] in text:
                held.append(line)
                if len(held) == len(block):
                    held, block = [], ()
                continue
            yield from held
            held, block = [], ()
        starts = [b for b in known if b[0] in text]
        if not starts:
            yield line
        elif len(starts[0]) > 1:
            held, block = [line], starts[0]
    yield from held


class StderrRelay:
    """Started only by the ``torchtfx`` entry point, without -v; ``stop`` before the process exits."""

    def __init__(self) -> None:
        self._saved: int | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._saved is not None:
            return
        sys.stderr.flush()
        self._saved = os.dup(2)
        read, write = os.pipe()
        os.dup2(write, 2)  # this process's and every later child's descriptor 2
        os.close(write)
        self._thread = threading.Thread(target=self._copy, args=(read, self._saved), daemon=True)
        self._thread.start()

    @staticmethod
    def _copy(read: int, out: int) -> None:
        with os.fdopen(read, "rb") as pipe:
            for line in filtered(pipe):
                while line:
                    line = line[os.write(out, line) :]

    def stop(self, timeout: float = 2.0) -> None:
        """Restore descriptor 2 and let the copy drain; a child still holding the pipe is not waited for
        beyond ``timeout`` seconds."""
        if self._saved is None or self._thread is None:
            return
        sys.stderr.flush()
        os.dup2(self._saved, 2)  # closes this process's write end of the pipe
        self._thread.join(timeout)
        if not self._thread.is_alive():  # else the copy still writes to it until the process exits
            os.close(self._saved)
        self._saved = None
