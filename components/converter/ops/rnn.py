"""Recurrent operators: LSTM, GRU and RNN, all directions and layouts, as a ``tf.scan`` over time."""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from torchtfx.components.converter.ops.registry import op

Act = Callable[[tf.Tensor], tf.Tensor]

# name -> (needs alpha, needs beta, default alpha, default beta), as onnxruntime reads activation_alpha/beta:
# consumed in order by the activations that take them, 0 where ONNX names no default.
_ACT_ARGS = {
    "affine": (True, True, 0.0, 0.0),
    "leakyrelu": (True, False, 0.01, 0.0),
    "thresholdedrelu": (True, False, 0.0, 0.0),
    "scaledtanh": (True, True, 0.0, 0.0),
    "hardsigmoid": (True, True, 0.2, 0.5),
    "elu": (True, False, 1.0, 0.0),
}


def _activation(name: str, a: float, b: float) -> Act:
    fns: dict[str, Act] = {
        "relu": tf.nn.relu,
        "tanh": tf.tanh,
        "sigmoid": tf.sigmoid,
        "affine": lambda x: a * x + b,
        "leakyrelu": lambda x: tf.where(x >= 0, x, a * x),
        "thresholdedrelu": lambda x: tf.where(x > a, x, tf.zeros_like(x)),
        "scaledtanh": lambda x: a * tf.tanh(b * x),
        "hardsigmoid": lambda x: tf.clip_by_value(a * x + b, 0.0, 1.0),
        "elu": lambda x: tf.where(x >= 0, x, a * (tf.exp(x) - 1)),
        "softsign": tf.nn.softsign,
        "softplus": tf.nn.softplus,
    }
    if name not in fns:
        raise ValueError(f"unknown RNN activation {name!r}")
    return fns[name]


def _activations(node, defaults: list[str], num_dir: int) -> list[list[Act]]:
    """Per direction, the node's activation functions (``activations`` with ``activation_alpha/beta``)."""
    n = len(defaults)
    names = [v.decode() if isinstance(v, bytes) else v for v in node.attr("activations", [])] or defaults * num_dir
    if len(names) == n * (3 - num_dir):
        # One direction's list for both, or (RNN's old default ["Tanh", "Tanh"]) two for one.
        names = (names * 2)[: n * num_dir]
    if len(names) != n * num_dir:
        raise ValueError(f"{node.op_type} needs {n * num_dir} activations, got {names}")
    alphas, betas = list(node.attr("activation_alpha", [])), list(node.attr("activation_beta", []))
    acts = []
    for k, name in enumerate(v.lower() for v in names):
        need_a, need_b, a, b = _ACT_ARGS.get(name, (False, False, 0.0, 0.0))
        if n == 1:
            # RNN: onnxruntime and ONNX's reference index alpha/beta by direction.
            a, b = alphas[k] if k < len(alphas) else a, betas[k] if k < len(betas) else b
        else:
            a = alphas.pop(0) if need_a and alphas else a
            b = betas.pop(0) if need_b and betas else b
        acts.append(_activation(name, a, b))
    return [acts[d * n : (d + 1) * n] for d in range(num_dir)]


def _clipper(node) -> Act:
    clip = node.attr("clip")
    return (lambda v: v) if clip is None else (lambda v: tf.clip_by_value(v, -clip, clip))


def _lstm_cell(node, acts: list[Act], r, rb, p):
    """The LSTM step: gates ``iofc``, peepholes ``iof``; ``xw`` is the input's part of the gates, bias included."""
    f, g, h = acts
    clip = _clipper(node)
    p_i, p_o, p_f = tf.split(p, 3) if p is not None else (0.0, 0.0, 0.0)
    coupled = bool(node.attr("input_forget", 0))

    def step(state, xw):
        h_prev, c_prev = state
        gates = xw + tf.matmul(h_prev, r, transpose_b=True) + rb
        gi, go, gf, gc = tf.split(gates, 4, axis=-1)
        i = f(clip(gi + p_i * c_prev))
        forget = 1 - i if coupled else f(clip(gf + p_f * c_prev))
        c = forget * c_prev + i * g(clip(gc))
        o = f(clip(go + p_o * c))
        return o * h(c), c

    return step


def _gru_cell(node, acts: list[Act], r, rb, p):
    """The GRU step: gates ``zrh``; ``linear_before_reset`` applies the reset gate after ``h @ Rh + Rbh``."""
    f, g = acts
    clip = _clipper(node)
    hidden = r.shape[-1]
    r_zr, r_h = r[: 2 * hidden], r[2 * hidden :]
    rb_zr, rb_h = tf.split(rb, [2 * hidden, hidden])
    linear = bool(node.attr("linear_before_reset", 0))

    def step(state, xw):
        (h_prev,) = state
        xw_zr, xw_h = tf.split(xw, [2 * hidden, hidden], axis=-1)
        z, reset = tf.split(f(clip(xw_zr + tf.matmul(h_prev, r_zr, transpose_b=True) + rb_zr)), 2, axis=-1)
        if linear:
            candidate = reset * (tf.matmul(h_prev, r_h, transpose_b=True) + rb_h)
        else:
            candidate = tf.matmul(reset * h_prev, r_h, transpose_b=True) + rb_h
        new = g(clip(xw_h + candidate))
        return ((1 - z) * new + z * h_prev,)

    return step


def _rnn_cell(node, acts: list[Act], r, rb, p):
    (f,) = acts
    clip = _clipper(node)

    def step(state, xw):
        return (f(clip(xw + tf.matmul(state[0], r, transpose_b=True) + rb)),)

    return step


def _run_direction(step, xw: tf.Tensor, state: tuple, lens: tf.Tensor | None, reverse: bool):
    """Runs ``step`` over time-major ``xw`` [T, B, G]; returns Y [T, B, H] and the final states. Past a batch
    entry's ``sequence_lens`` its state stays and its Y is 0; ``reverse`` walks each sequence from its own end."""
    if reverse:
        xw = tf.reverse(xw, [0]) if lens is None else tf.reverse_sequence(xw, lens, seq_axis=0, batch_axis=1)
    if lens is None:
        states = tf.scan(step, xw, initializer=state)
        y = states[0]
    else:
        mask = tf.transpose(tf.sequence_mask(lens, tf.shape(xw)[0]))[:, :, None]

        def masked(s, e):
            new = step(s[1:], e[0])
            return (
                tf.where(e[1], new[0], tf.zeros_like(new[0])),
                *(tf.where(e[1], n, old) for n, old in zip(new, s[1:], strict=True)),
            )

        states = tf.scan(masked, (xw, mask), initializer=(tf.zeros_like(state[0]), *state))
        y, states = states[0], states[1:]
    if reverse:
        y = tf.reverse(y, [0]) if lens is None else tf.reverse_sequence(y, lens, seq_axis=0, batch_axis=1)
    return y, [s[-1] for s in states]


def _recurrent(node, x: list, cell, gates: int, defaults: list[str], n_states: int) -> list:
    data, w, r, b, lens = (x + [None] * 5)[:5]
    initial = (x + [None] * 8)[5 : 5 + n_states]
    peep = x[7] if n_states == 2 and len(x) > 7 else None
    layout = node.attr("layout", 0)
    direction = node.attr("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    num_dir = 2 if direction == "bidirectional" else 1
    acts = _activations(node, defaults, num_dir)
    if layout:
        data = tf.transpose(data, [1, 0, 2])
        initial = [None if t is None else tf.transpose(t, [1, 0, 2]) for t in initial]
    hidden = r.shape[-1] if r.shape[-1] is not None else node.attr("hidden_size")
    batch = tf.shape(data)[1]
    lens = None if lens is None else tf.cast(lens, tf.int32)
    ys, finals = [], []
    for d in range(num_dir):
        w_d, r_d = w[d], r[d]
        wb, rb = (tf.zeros([gates * hidden], data.dtype),) * 2 if b is None else tf.split(b[d], 2)
        xw = tf.einsum("tbi,gi->tbg", data, w_d) + wb
        state = tuple(tf.zeros(tf.stack([batch, hidden]), data.dtype) if t is None else t[d] for t in initial)
        step = cell(node, acts[d], r_d, rb, None if peep is None else peep[d])
        y, final = _run_direction(step, xw, state, lens, direction == "reverse" or d == 1)
        ys.append(y)
        finals.append(final)
    y = tf.stack(ys, axis=1)  # [T, D, B, H]
    outs = [tf.stack([f[k] for f in finals]) for k in range(n_states)]  # [D, B, H] each
    if layout:
        y = tf.transpose(y, [2, 0, 1, 3])
        outs = [tf.transpose(o, [1, 0, 2]) for o in outs]
    return [y, *outs]


@op("LSTM")
def _lstm(node, x):
    return _recurrent(node, x, _lstm_cell, 4, ["Sigmoid", "Tanh", "Tanh"], 2)


@op("GRU")
def _gru(node, x):
    return _recurrent(node, x, _gru_cell, 3, ["Sigmoid", "Tanh"], 1)


@op("RNN")
def _rnn(node, x):
    return _recurrent(node, x, _rnn_cell, 1, ["Tanh"], 1)
