"""Control-flow operators: If (``tf.cond``), Loop and Scan (``tf.while_loop``), their bodies as subgraphs.

A loop body runs through :func:`run_subgraph` on the loop's current tensors. Before the real loop, the body is
traced on its own (``_probe``) to learn the dtypes of its scan outputs (subgraph outputs often carry no type) and
shapes for the loop-carried values that hold in every iteration (they may change from one to the next).
"""

from __future__ import annotations

import tensorflow as tf

from torchtfx.components.converter.ops.registry import op, run_subgraph, static

_INT64_MAX = 2**63 - 1


def _scalar(t: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    return tf.reshape(tf.cast(t, dtype), [])


@op("If")
def _if(node, x):
    cond = _scalar(x[0], tf.bool)
    then_branch, else_branch = node.attr("then_branch"), node.attr("else_branch")
    value = static(cond)
    if value is not None:
        return run_subgraph(node, then_branch if value else else_branch, [])
    # cond_v2 relaxes outputs whose shapes differ between the branches to their common shape.
    outs = tf.cond(cond, lambda: run_subgraph(node, then_branch, []), lambda: run_subgraph(node, else_branch, []))
    return list(outs)


def _probe(node, body, specs: list[tf.TensorSpec]) -> list[tf.TensorSpec]:
    fn = tf.function(lambda *a: run_subgraph(node, body, list(a)), autograph=False)
    return [tf.TensorSpec(o.shape, o.dtype) for o in fn.get_concrete_function(*specs).structured_outputs]


def _same(a: tf.TensorShape, b: tf.TensorShape) -> bool:
    return a.rank == b.rank and (a.rank is None or a.as_list() == b.as_list())


def _invariants(node, body, before: list, carried: list, after: list, skip: int):
    """Shapes of the ``carried`` values (body inputs between ``before`` and ``after``, outputs from ``skip``) that
    every iteration keeps, and the body's output specs on them."""
    shapes = [t.shape for t in carried]
    for attempt in range(4):
        if attempt == 3:
            shapes = [tf.TensorShape(None)] * len(carried)
        specs = [tf.TensorSpec(s, t.dtype) for s, t in zip(shapes, carried, strict=True)]
        outs = _probe(node, body, [*before, *specs, *after])
        got = [o.shape for o in outs[skip : skip + len(carried)]]
        relaxed = [s.most_specific_compatible_shape(g) for s, g in zip(shapes, got, strict=True)]
        if all(_same(s, r) for s, r in zip(shapes, relaxed, strict=True)):
            break
        shapes = relaxed
    return shapes, outs


def _arrays(specs: list[tf.TensorSpec]) -> list[tf.TensorArray]:
    return [tf.TensorArray(s.dtype, size=0, dynamic_size=True, element_shape=s.shape) for s in specs]


def _stacked(array: tf.TensorArray, spec: tf.TensorSpec) -> tf.Tensor:
    """The scan outputs along a new first axis; after no iteration, dims the body never fixed are 0 (as in
    onnxruntime, which gives shape [0] when it knows nothing)."""
    if spec.shape.is_fully_defined():
        return array.stack()
    empty = [0, *(d or 0 for d in spec.shape.as_list())] if spec.shape.rank is not None else [0]
    return tf.cond(array.size() > 0, array.stack, lambda: tf.zeros(empty, spec.dtype))


def _spec(t: tf.Tensor) -> tf.TensorSpec:
    return tf.TensorSpec(t.shape, t.dtype)


@op("Loop")
def _loop(node, x):
    trip, cond, carried = x[0], x[1], [tf.convert_to_tensor(t) for t in x[2:]]
    body = node.attr("body")
    limit = tf.constant(_INT64_MAX, tf.int64) if trip is None else _scalar(trip, tf.int64)
    keep = tf.constant(True) if cond is None else _scalar(cond, tf.bool)
    start = tf.constant(0, tf.int64)
    shapes, specs = _invariants(node, body, [_spec(start), _spec(keep)], carried, [], 1)
    n = len(carried)

    def step(i, c, values, arrays):
        outs = run_subgraph(node, body, [i, c, *values])
        # Without a cond input the body's condition output is ignored (ONNX: a for loop).
        c = c if cond is None else _scalar(outs[0], tf.bool)
        arrays = [a.write(tf.cast(i, tf.int32), o) for a, o in zip(arrays, outs[1 + n :], strict=True)]
        return i + 1, c, list(outs[1 : 1 + n]), arrays

    scans = specs[1 + n :]
    _, _, values, arrays = tf.while_loop(
        lambda i, c, *_: tf.logical_and(i < limit, c),
        step,
        [start, keep, carried, _arrays(scans)],
        shape_invariants=[start.shape, keep.shape, shapes, [tf.TensorShape(None)] * len(scans)],
    )
    return [*values, *(_stacked(a, s) for a, s in zip(arrays, scans, strict=True))]


def _move(t: tf.Tensor, source: int, dest: int) -> tf.Tensor:
    perm = list(range(t.shape.rank))
    perm.insert(dest, perm.pop(source))
    return tf.transpose(t, perm) if source != dest else t


def _scan_loop(node, states: list, seqs: list, body) -> tuple[list, list]:
    """Runs ``body`` over the first axis of ``seqs`` (time-major): final states and stacked scan outputs."""
    n = len(states)
    length = tf.shape(seqs[0])[0] if seqs else tf.constant(0)
    elems = [tf.TensorSpec(s.shape[1:], s.dtype) for s in seqs]
    shapes, specs = _invariants(node, body, [], states, elems, 0)

    def step(i, values, arrays):
        outs = run_subgraph(node, body, [*values, *(tf.gather(s, i) for s in seqs)])
        arrays = [a.write(i, o) for a, o in zip(arrays, outs[n:], strict=True)]
        return i + 1, list(outs[:n]), arrays

    scans = specs[n:]
    start = tf.constant(0)
    _, values, arrays = tf.while_loop(
        lambda i, *_: i < length,
        step,
        [start, states, _arrays(scans)],
        shape_invariants=[start.shape, shapes, [tf.TensorShape(None)] * len(scans)],
    )
    return values, [_stacked(a, s) for a, s in zip(arrays, scans, strict=True)]


@op("Scan")
def _scan(node, x):
    if node.opset < 9:
        return _scan8(node, x)
    m = node.attr("num_scan_inputs")
    states, inputs = [tf.convert_to_tensor(t) for t in x[: len(x) - m]], x[len(x) - m :]
    axes = node.attr("scan_input_axes") or [0] * m
    directions = node.attr("scan_input_directions") or [0] * m
    seqs = []
    for t, axis, reverse in zip(inputs, axes, directions, strict=True):
        t = _move(t, axis % t.shape.rank, 0)
        seqs.append(tf.reverse(t, [0]) if reverse else t)
    values, scans = _scan_loop(node, states, seqs, node.attr("body"))
    out_axes = node.attr("scan_output_axes") or [0] * len(scans)
    out_dirs = node.attr("scan_output_directions") or [0] * len(scans)
    outs = []
    for t, axis, reverse in zip(scans, out_axes, out_dirs, strict=True):
        t = tf.reverse(t, [0]) if reverse else t
        outs.append(_move(t, 0, axis % t.shape.rank))
    return [*values, *outs]


def _scan8(node, x):
    """Opset 8's Scan: a leading batch axis on every input, scan axis 1, optional per-entry ``sequence_lens``;
    scan outputs past an entry's length are 0."""
    m = node.attr("num_scan_inputs")
    lens, states, inputs = x[0], list(x[1 : len(x) - m]), x[len(x) - m :]
    directions = node.attr("directions") or [0] * m
    body = node.attr("body")
    batch, steps = tf.shape(inputs[0])[0], tf.shape(inputs[0])[1]
    lens = tf.fill([batch], steps) if lens is None else tf.cast(lens, tf.int32)

    def one(b):
        seqs = [t[b, : lens[b]] for t in inputs]
        seqs = [tf.reverse(s, [0]) if rev else s for s, rev in zip(seqs, directions, strict=True)]
        values, scans = _scan_loop(node, [s[b] for s in states], seqs, body)
        pad = [tf.pad(s, [[0, steps - lens[b]]] + [[0, 0]] * (s.shape.rank - 1)) for s in scans]
        return [*values, *pad]

    elems = [tf.TensorSpec(t.shape[2:], t.dtype) for t in inputs]
    specs = _probe(node, body, [tf.TensorSpec(s.shape[1:], s.dtype) for s in states] + elems)
    signature = [tf.TensorSpec(None, s.dtype) for s in specs]
    return tf.map_fn(one, tf.range(batch), fn_output_signature=signature)
