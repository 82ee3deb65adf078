"""The converted network split by rows for large batches, so that its matmuls use more than one core.

Measured cause: TensorFlow's oneDNN matmul kernels (``mkl_matmul_ops_common.h``, ``ExecuteSingleThreadedGemm``)
run on one thread whenever ``4 * (m*n + k*(m+n))`` bytes fit in the L2 cache. For the taxi MLP's first layer
at batch 1024 that is 1.1 MB against this machine's 2 MB L2: the 1024 x 133 x 128 matmul took 0.22 ms with
one intra-op thread and with two alike, while onnxruntime ran both hidden layers on both cores in 0.20 ms.
Split into shards of rows, the same graph runs once per shard, the shards side by side on the inter-op
threads (TF Serving's ``--tensorflow_inter_op_parallelism``), then their outputs are joined row-wise.

Measured on the taxi MLP through TF's C API (``TF_SessionRun``, the call TF Serving makes), ms per call
at batch 128 / 256 / 512 / 1024, 2 cores: whole 0.129 / 0.174 / 0.326 / 0.549; 2 shards 0.128 / 0.157 /
0.204 / 0.388; 4 shards 0.222 / 0.225 / 0.259 / 0.342 (the extra shards cost 0.1 ms of scheduling at any
batch). Hence 2 shards from 256 rows; smaller batches run whole.

Only a network whose rows do not interact can be split: :func:`shard_rows` runs a probe batch both ways
and keeps the whole network when they differ (a model normalizing over the batch, say) or when an output
is not batch-major. The parity gate then checks the served model on 4096-row batches, the sharded path.
"""

from __future__ import annotations

import logging
import types

import numpy as np
import onnx
import tensorflow as tf

logger = logging.getLogger(__name__)

ROW_SHARDS = 2
SHARD_MIN_ROWS = 256
_PROBE_ROWS = 2 * SHARD_MIN_ROWS


class RowShardedNetwork(tf.Module):
    """``network(*inputs)``, run per shard of rows when the batch has at least ``min_rows`` rows."""

    def __init__(self, network, shards: int = ROW_SHARDS, min_rows: int = SHARD_MIN_ROWS) -> None:
        super().__init__(name="row_sharded")
        if shards < 2 or min_rows < shards:
            raise ValueError(f"row sharding needs shards >= 2 and min_rows >= shards, got {shards}, {min_rows}")
        self.network = network
        self._shards, self._min_rows = shards, min_rows
        # ``_noinline``: TF's graph optimizer keeps the call (see ``__call__``). Out of the tracked attributes:
        # the SavedModel needs the function only where a signature calls it.
        self._calls = types.SimpleNamespace(
            sharded=tf.function(self._sharded_call, autograph=False, experimental_attributes={"_noinline": True})
        )

    def __call__(self, *inputs: tf.Tensor) -> list[tf.Tensor]:
        batch = tf.shape(inputs[0])[0]
        # Measured through TF's C API, ms per call at batch 1 / 32 / 1024: the whole graph alone 0.053 / 0.073 /
        # 0.555; this cond with both branches inlined 0.097 / 0.100 / 0.457; no cond, a small batch whole in the
        # first shard and the other shard empty, 0.091 / 0.123 / 0.424 (the empty shard still runs every op, on
        # another thread). The cond is lowered to Switch/Merge, and the executor still visits every node of the
        # branch not taken to mark it dead: inlined, the sharded branch is two copies of the network. So the
        # sharded branch is one call of a function that stays a call (``_noinline``): one dead node below
        # ``min_rows``. Taxi MLP, 12 interleaved rounds, ms at batch 1 / 32 / 1024: both branches inlined 0.067 /
        # 0.126 / 0.510, the sharded one a call 0.059 / 0.115 / 0.506, the whole graph alone 0.055 / 0.082 /
        # 0.596; the whole served signature at batch 1 (parse, TFT, network) 0.204 -> 0.176 ms.
        return tf.cond(batch >= self._min_rows, lambda: self._calls.sharded(*inputs), lambda: self.whole(inputs))

    def whole(self, inputs) -> list[tf.Tensor]:
        return list(self.network(*inputs))

    def _sharded_call(self, *inputs: tf.Tensor) -> list[tf.Tensor]:
        return self.sharded(inputs, tf.shape(inputs[0])[0])

    def sharded(self, inputs, batch) -> list[tf.Tensor]:
        """Shard i: rows ``[batch * i // shards, batch * (i + 1) // shards)``."""
        bounds = [batch * i // self._shards for i in range(self._shards + 1)]
        parts = [self.network(*[x[bounds[i] : bounds[i + 1]] for x in inputs]) for i in range(self._shards)]
        return [tf.concat(list(outputs), 0) for outputs in zip(*parts, strict=True)]


def probe_inputs(model: onnx.ModelProto, rows: int = _PROBE_ROWS) -> list[np.ndarray] | None:
    """One batch for the graph's inputs: floats drawn from N(0, 1), integers 0 (a valid id of any table);
    None when an input is neither or has a non-leading dimension of unknown size."""
    initializers = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(0)
    batch = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        dims = tensor.shape.dim
        known = [d.dim_value for d in dims[1:] if d.HasField("dim_value")]
        if not dims or len(known) < len(dims) - 1:
            return None
        shape = [rows, *known]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if dtype.kind == "f":
            batch.append(rng.normal(size=shape).astype(dtype))
        elif dtype.kind in "iu":
            batch.append(np.zeros(shape, dtype))
        else:
            return None
    return batch


def _row_independent(network, batch: list[np.ndarray]) -> str | None:
    """None when the probe batch gives the same outputs whole and sharded, else why not."""
    sharded = RowShardedNetwork(network)
    tensors = [tf.constant(x) for x in batch]
    try:
        whole = [t.numpy() for t in sharded.whole(tensors)]
        split = [t.numpy() for t in sharded.sharded(tensors, tf.constant(len(batch[0])))]
    except Exception as err:  # a network that cannot run on row slices stays whole
        return f"the network does not run on row shards ({type(err).__name__}: {str(err).splitlines()[0][:200]})"
    for index, (a, b) in enumerate(zip(whole, split, strict=True)):
        if a.shape[:1] != (len(batch[0]),):
            return f"output {index} has shape {a.shape}, not one row per input row"
        scale = max(1.0, float(np.max(np.abs(a))) if a.size and a.dtype.kind == "f" else 1.0)
        if a.shape != b.shape or (a.size and np.max(np.abs(a.astype(np.float64) - b)) > 1e-6 * scale):
            return f"output {index} differs when the batch is split: its rows depend on each other"
    return None


def shard_rows(network, model: onnx.ModelProto) -> tf.Module:
    """``network`` as a :class:`RowShardedNetwork` when a probe batch shows its rows independent, else as it is."""
    batch = probe_inputs(model)
    why = "an input is not a batch of fixed-width rows" if batch is None else _row_independent(network, batch)
    if why:
        logger.info("The converted network runs whole at every batch size: %s", why)
        return network
    logger.info("Batches of %s rows or more run as %s row shards side by side", SHARD_MIN_ROWS, ROW_SHARDS)
    return RowShardedNetwork(network)
