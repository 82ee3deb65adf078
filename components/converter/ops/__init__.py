"""ONNX operators as TensorFlow ops, by ONNX semantics (opsets 13-22), one module per operator family.

Importing this package registers every handler in :data:`OPS`; :mod:`.registry` holds what they share.
"""

from torchtfx.components.converter.ops import (  # noqa: F401  (each module registers its handlers)
    control,
    conv,
    core,
    elementwise,
    fused,
    indexing,
    losses,
    normalization,
    pool,
    quantize,
    reduce,
    resize,
    rnn,
    sampling,
    scatter,
    shape,
    signal,
)
from torchtfx.components.converter.ops.registry import (
    DTYPES,
    FUSED_DOMAIN,
    FUSED_OPS,
    OPS,
    Node,
    NodeError,
    evaluate,
    op,
    run_subgraph,
    static,
)

__all__ = [
    "DTYPES",
    "FUSED_DOMAIN",
    "FUSED_OPS",
    "OPS",
    "Node",
    "NodeError",
    "evaluate",
    "op",
    "run_subgraph",
    "static",
]
