"""Signal operators: DFT, STFT, window functions, MelWeightMatrix, TfIdfVectorizer."""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from torchtfx.components.converter.ops.registry import DTYPES, op, static


def _out_dtype(node, default: int = 1) -> tf.DType:
    """The dtype named by ``output_datatype`` (FLOAT meaning the network's float dtype)."""
    dtype = DTYPES[node.attr("output_datatype", default)]
    return node.float_dtype if dtype == tf.float32 else dtype


def _scalar(t: tf.Tensor):
    """A scalar input as a Python int when constant, else an int32 scalar tensor."""
    value = static(t)
    return int(np.reshape(value, [])) if value is not None else tf.cast(tf.reshape(t, []), tf.int32)


def _unpack(x: tf.Tensor) -> tf.Tensor:
    """ONNX's real-or-complex layout (a trailing dim of 1 or 2) as a real or complex tensor without that dim."""
    last = x.shape[-1]
    if last not in (1, 2):
        raise ValueError(f"the signal's last dim must be 1 (real) or 2 (complex), got shape {x.shape}")
    x = tf.cast(x, tf.float64 if x.dtype == tf.float64 else tf.float32)
    return x[..., 0] if last == 1 else tf.complex(x[..., 0], x[..., 1])


def _pack(c: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    return tf.cast(tf.stack([tf.math.real(c), tf.math.imag(c)], axis=-1), dtype)


def _fit_last(c: tf.Tensor, n) -> tf.Tensor:
    """``c`` truncated or zero-padded along its last axis to ``n`` entries."""
    if isinstance(n, int) and c.shape[-1] == n:
        return c
    c = c[..., :n]
    pad = tf.maximum(n - tf.shape(c)[-1], 0)
    return tf.pad(c, [[0, 0]] * (c.shape.rank - 1) + [[0, pad]])


def _fft_last(v: tf.Tensor, n, inverse: bool, onesided: bool) -> tf.Tensor:
    """The n-point (inverse) DFT along the last axis of real or complex ``v``."""
    if v.dtype.is_complex or inverse:
        if not v.dtype.is_complex:
            v = tf.complex(v, tf.zeros_like(v))
        y = (tf.signal.ifft if inverse else tf.signal.fft)(_fit_last(v, n))
        return y[..., : n // 2 + 1] if onesided else y
    # a real signal goes through the real FFT, which (unlike a complex one) gives exact zeros where the
    # spectrum is real (DC, Nyquist); the other half is the conjugate mirror
    y = tf.signal.rfft(v, fft_length=tf.reshape(n, [1]))
    if onesided:
        return y
    return tf.concat([y, tf.math.conj(tf.reverse(y[..., 1 : n - n // 2], [-1]))], axis=-1)


@op("DFT")
def _dft(node, x):
    signal, length, axis = ([*x, None, None])[:3]
    c = _unpack(signal)
    rank = signal.shape.rank
    if node.opset < 20:
        axis = node.attr("axis", 1)
    elif axis is None:
        axis = -2
    elif (static_axis := static(axis)) is not None:
        axis = int(static_axis)
    perm = None
    if isinstance(axis, int):
        axis %= rank
        if axis != rank - 2:
            perm = list(range(rank - 1))
            perm[axis], perm[-1] = rank - 2, axis
    else:
        # an axis known only at run time: swap it with the last complex axis (the swap is its own inverse)
        axis = tf.math.floormod(tf.cast(axis, tf.int32), rank)
        index = tf.range(rank - 1)
        perm = tf.where(index == axis, rank - 2, tf.where(index == rank - 2, axis, index))
    if perm is not None:
        c = tf.transpose(c, perm)
    if length is not None:
        n = _scalar(length)
    else:
        n = c.shape[-1] if c.shape[-1] is not None else tf.shape(c)[-1]
    y = _fft_last(c, n, bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0)))
    if perm is not None:
        y = tf.transpose(y, perm)
    return [_pack(y, signal.dtype)]


@op("STFT")
def _stft(node, x):
    signal, step, window, length = ([*x, None, None])[:4]
    step = _scalar(step)
    if length is not None:
        length = _scalar(length)
    elif window is not None:
        length = window.shape[0] if window.shape[0] is not None else tf.shape(window)[0]
    else:
        length = signal.shape[-2] if signal.shape[-2] is not None else tf.shape(signal)[-2]
    frames = tf.signal.frame(_unpack(signal), length, step, axis=-1)  # [batch, frames, length]
    if window is not None:
        window = tf.cast(window, frames.dtype.real_dtype)
        frames *= tf.complex(window, tf.zeros_like(window)) if frames.dtype.is_complex else window
    y = _fft_last(frames, length, False, bool(node.attr("onesided", 1)))
    return [_pack(y, signal.dtype)]


def _window(node, size: tf.Tensor, terms: list[float]) -> tf.Tensor:
    """The generalised cosine window ``sum_k (-1)^k a_k cos(2 pi k n / N)``, N = size (periodic) or size - 1."""
    size = tf.cast(tf.reshape(size, []), tf.int64)
    n = tf.cast(tf.range(size), tf.float64)
    period = tf.cast(size if node.attr("periodic", 1) else size - 1, tf.float64)
    out = tf.zeros_like(n)
    for k, a in enumerate(terms):
        out += (-1) ** k * a * tf.cos(2 * math.pi * k * n / period)
    return tf.cast(out, _out_dtype(node))


@op("HannWindow")
def _hann(node, x):
    return [_window(node, x[0], [0.5, 0.5])]


@op("HammingWindow")
def _hamming(node, x):
    return [_window(node, x[0], [25 / 46, 21 / 46])]


@op("BlackmanWindow")
def _blackman(node, x):
    return [_window(node, x[0], [0.42, 0.5, 0.08])]


@op("MelWeightMatrix")
def _mel_weight_matrix(node, x):
    num_mel, dft_length, sample_rate, low_hz, high_hz = x
    num_mel = tf.cast(tf.reshape(num_mel, []), tf.int64)
    dft_length = tf.cast(tf.reshape(dft_length, []), tf.int64)
    sample_rate = tf.cast(tf.reshape(sample_rate, []), tf.float64)

    def to_mel(hz: tf.Tensor) -> tf.Tensor:
        return 2595.0 * tf.math.log(1.0 + tf.cast(tf.reshape(hz, []), tf.float64) / 700.0) / math.log(10.0)

    low_mel, high_mel = to_mel(low_hz), to_mel(high_hz)
    # ONNX's reference spaces num_mel + 2 points by (high - low) / (num_mel + 2), not / (num_mel + 1)
    step = (high_mel - low_mel) / tf.cast(num_mel + 2, tf.float64)
    mel = tf.cast(tf.range(num_mel + 2), tf.float64) * step + low_mel
    hz = 700.0 * (tf.pow(tf.constant(10.0, tf.float64), mel / 2595.0) - 1.0)
    bins = tf.floor(tf.cast(dft_length + 1, tf.float64) * hz / sample_rate)
    j = tf.cast(tf.range(dft_length // 2 + 1), tf.float64)[:, None]
    low, center, high = bins[None, :-2], bins[None, 1:-1], bins[None, 2:]
    rise = tf.where(center > low, (j - low) / tf.maximum(center - low, 1.0), tf.cast(j == center, tf.float64))
    rise = tf.where((j >= low) & (j <= center), rise, 0.0)
    fall = tf.where((j >= center) & (j < high), (high - j) / tf.maximum(high - center, 1.0), 0.0)
    return [tf.cast(tf.where(j >= center, tf.where(j < high, fall, rise), rise), _out_dtype(node))]


def _tfidf_grams(node) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """The pool's n-grams to count: (n, grams [g, n], output index of each) for each n in [min, max]."""
    pool = np.asarray(node.attr("pool_int64s", []), np.int64)
    if not len(pool):
        raise ValueError("TfIdfVectorizer over strings (pool_strings) is not supported")
    starts = list(node.attr("ngram_counts"))
    indexes = np.asarray(node.attr("ngram_indexes"), np.int64)
    low, high = node.attr("min_gram_length"), node.attr("max_gram_length")
    out, first_id = [], 0
    for i, start in enumerate(starts):
        n, end = i + 1, starts[i + 1] if i + 1 < len(starts) else len(pool)
        count = (end - start) // n
        if count > 0 and low <= n <= high:
            out.append((n, pool[start : start + count * n].reshape(count, n), indexes[first_id : first_id + count]))
        first_id += max(count, 0)
    return out


def _gram_counts(tokens: tf.Tensor, grams: np.ndarray, skip: int) -> tf.Tensor:
    """How often each of ``grams`` [g, n] occurs in each row of ``tokens``, its items ``skip`` apart."""
    n = grams.shape[1]
    width = tokens.shape[-1] if tokens.shape[-1] is not None else tf.shape(tokens)[-1]
    span = (n - 1) * skip
    size = max(width - span, 0) if isinstance(width, int) else tf.maximum(width - span, 0)
    windows = tf.stack([tokens[..., k * skip : k * skip + size] for k in range(n)], axis=-1)  # [..., L, n]
    hits = tf.reduce_all(windows[..., None, :] == tf.constant(grams), axis=-1)  # [..., L, g]
    return tf.reduce_sum(tf.cast(hits, tf.float32), axis=-2)


@op("TfIdfVectorizer")
def _tfidf_vectorizer(node, x):
    tokens = tf.cast(x[0], tf.int64)
    if tokens.shape.rank == 0:
        tokens = tokens[None]
    size = max(node.attr("ngram_indexes")) + 1
    width = tokens.shape[-1]
    freq = tf.zeros(tf.concat([tf.shape(tokens)[:-1], [size]], 0), tf.float32)
    for n, grams, indexes in _tfidf_grams(node):
        # unigrams do not depend on the skip distance: ONNX counts them once
        skips = [1] if n == 1 else range(1, node.attr("max_skip_count", 0) + 2)
        skips = [s for s in skips if width is None or (n - 1) * s < width]
        if not skips:
            continue
        counts = tf.add_n([_gram_counts(tokens, grams, s) for s in skips])
        scatter = np.zeros((len(grams), size), np.float32)
        scatter[np.arange(len(grams)), indexes] = 1.0
        freq += tf.tensordot(counts, tf.constant(scatter), axes=1)
    mode = node.attr("mode", b"TF")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    weights = node.attr("weights")
    if mode == "IDF":
        freq = tf.cast(freq > 0, tf.float32)
    if mode != "TF" and weights:
        freq *= tf.constant(np.asarray(weights[:size], np.float32))  # by output index, as the reference
    return [tf.cast(freq, node.float_dtype)]
