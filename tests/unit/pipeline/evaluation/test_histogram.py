"""ScalarHistogramCombiner against TFMA's own calibration histogram combiner, example by example: equal buckets
bit for bit where it takes its shortcut, TFMA's own path (and errors) everywhere else."""

from __future__ import annotations

import pickle
import tracemalloc

import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import calibration_histogram, metric_types

from torchtfx.pipeline.evaluation.histogram import ScalarHistogramCombiner, with_scalar_histograms

ONE_MODEL = tfma.EvalConfig(model_specs=[tfma.ModelSpec(label_key="label", prediction_key="p")])
TWO_MODELS = tfma.EvalConfig(
    model_specs=[
        tfma.ModelSpec(name="candidate", label_key="label"),
        tfma.ModelSpec(name="baseline", label_key="label", is_baseline=True),
    ]
)


def _combiners(eval_config: tfma.EvalConfig, **kwargs) -> tuple:
    (computation,) = calibration_histogram.calibration_histogram(eval_config=eval_config, **kwargs)
    (fast,) = with_scalar_histograms([computation])
    assert type(fast.combiner) is ScalarHistogramCombiner and fast.keys == computation.keys
    return computation.combiner, fast.combiner


def _inputs(label, prediction, weight=None) -> metric_types.StandardMetricInputs:
    return metric_types.StandardMetricInputs(labels=label, predictions=prediction, example_weights=weight)


def _filled(combiner, elements) -> list[tuple]:
    accumulator = combiner.create_accumulator()
    for element in elements:
        accumulator = combiner.add_input(accumulator, element)
    (histogram,) = combiner.extract_output(accumulator).values()
    return [(b.bucket_id, b.weighted_labels, b.weighted_predictions, b.weighted_examples) for b in histogram]


def _binary_examples(count: int, label_dtype=np.int64, weights: bool = False) -> list:
    rng = np.random.default_rng(7)
    labels = (rng.random(count) < 0.3).astype(label_dtype)
    predictions = rng.random(count).astype(np.float32)
    predictions[:3] = [0.0, 0.5, 1.0]  # bucket edges
    weight = rng.choice(np.array([0.0, 0.5, 1.0, 2.5], dtype=np.float32), count) if weights else [None] * count
    return [
        _inputs(np.array([lab]), np.array([p]), None if w is None else np.array([w]))
        for lab, p, w in zip(labels, predictions, weight, strict=True)
    ]


@pytest.mark.parametrize("label_dtype", [np.int64, np.float32])
@pytest.mark.parametrize("num_buckets", [10_000, 100])
def test_binary_examples_give_tfma_s_buckets_bit_for_bit(label_dtype, num_buckets):
    tfma_combiner, fast = _combiners(ONE_MODEL, num_buckets=num_buckets)
    elements = _binary_examples(3000, label_dtype)
    assert _filled(fast, elements) == _filled(tfma_combiner, elements)


def test_example_weights_including_zero_give_tfma_s_buckets():
    tfma_combiner, fast = _combiners(ONE_MODEL, example_weighted=True)
    elements = _binary_examples(2000, weights=True)
    assert _filled(fast, elements) == _filled(tfma_combiner, elements)


def test_two_models_read_their_own_prediction_and_a_dict_label_by_label_key():
    """With a champion, TFMA keys predictions by model name; a label may come as a dict under the label key."""
    for model_name in ("candidate", "baseline"):
        tfma_combiner, fast = _combiners(TWO_MODELS, model_name=model_name)
        elements = [
            _inputs(
                {"label": np.array([i % 2])}, {"candidate": np.array([0.1 * (i % 10)]), "baseline": np.array([0.3])}
            )
            for i in range(50)
        ]
        assert _filled(fast, elements) == _filled(tfma_combiner, elements)


def test_what_the_shortcut_does_not_cover_goes_through_tfma_s_own_path():
    """A fractional label is split in two by TFMA; a [1, 1] array and a plain float are converted by TFMA."""
    tfma_combiner, fast = _combiners(ONE_MODEL)
    elements = [
        _inputs(np.array([0.3]), np.array([0.7], dtype=np.float32)),
        _inputs(np.array([[1]]), np.array([[0.25]])),
        _inputs(1.0, np.array([0.9])),
    ]
    assert _filled(fast, elements) == _filled(tfma_combiner, elements)


@pytest.mark.parametrize(
    ("label", "prediction", "message"),
    [
        (np.array([2]), np.array([0.4]), "label must be within"),
        (np.array([1]), None, "no value provided for prediction"),
        (np.array([1]), {"candidate": np.array([0.4])}, "unable to prepare prediction"),
    ],
)
def test_bad_examples_raise_tfma_s_own_error(label, prediction, message):
    tfma_combiner, fast = _combiners(ONE_MODEL)
    for combiner in (tfma_combiner, fast):
        with pytest.raises(ValueError, match=message):
            combiner.add_input(combiner.create_accumulator(), _inputs(label, prediction))


def test_other_computations_are_left_as_they_are():
    computations = tfma.metrics.ExampleCount().computations() + tfma.metrics.MeanLabel().computations()
    assert with_scalar_histograms(computations) == computations


def _partials(combiner, elements, parts: int) -> list:
    """Accumulators over ``parts`` interleaved slices of the elements (one empty), as bundles would fill them."""
    partials = []
    for part in range(parts):
        accumulator = combiner.create_accumulator()
        for element in elements[part::parts] if part else []:
            accumulator = combiner.add_input(accumulator, element)
        partials.append(accumulator)
    return partials


def _buckets(combiner, accumulator) -> list[tuple]:
    (histogram,) = combiner.extract_output(accumulator).values()
    return [(b.bucket_id, b.weighted_labels, b.weighted_predictions, b.weighted_examples) for b in histogram]


@pytest.mark.parametrize("num_buckets", [10_000, 100])
def test_packed_accumulators_merge_to_tfma_s_histogram_bit_for_bit_through_a_pickle(num_buckets):
    """Beam compacts each bundle's accumulator, pickles it through the shuffle and merges; TFMA merges dicts."""
    tfma_combiner, fast = _combiners(ONE_MODEL, example_weighted=True, num_buckets=num_buckets)
    elements = _binary_examples(3000, weights=True)
    shuffled = [pickle.loads(pickle.dumps(fast.compact(a))) for a in _partials(fast, elements, 4)]
    merged = fast.merge_accumulators(iter(shuffled[:2]))  # merges of merges, as a combiner tree does
    merged = fast.merge_accumulators(iter([merged, *shuffled[2:]]))
    expected = tfma_combiner.merge_accumulators(iter(_partials(tfma_combiner, elements, 4)))
    assert _buckets(fast, merged) == _buckets(tfma_combiner, expected)


def test_an_example_added_after_compacting_counts_once():
    tfma_combiner, fast = _combiners(ONE_MODEL)
    elements = _binary_examples(500)
    accumulator = fast.create_accumulator()
    for element in elements[:300]:
        accumulator = fast.add_input(accumulator, element)
    accumulator = fast.compact(accumulator)
    for element in elements[300:]:
        accumulator = fast.add_input(accumulator, element)
    assert _buckets(fast, accumulator) == _filled(tfma_combiner, elements)


def _decoded_bytes(payload: bytes) -> int:
    """Memory that unpickling ``payload`` allocates (its objects, as the grouping runner holds them)."""
    tracemalloc.start()
    try:
        decoded = pickle.loads(payload)
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del decoded
    return size


def test_a_packed_10000_bucket_histogram_decodes_to_a_fraction_of_tfma_s():
    """What Beam's local runner decodes in the pipeline process to group the accumulators, per slice (module
    docstring of eval_histogram): 10,000 Bucket objects against two arrays."""
    _, fast = _combiners(ONE_MODEL)
    accumulator = fast.create_accumulator()
    for element in _binary_examples(40_000):
        accumulator = fast.add_input(accumulator, element)
    assert len(accumulator) > 9_000  # nearly every bucket holds an example
    packed, as_tfma = _decoded_bytes(pickle.dumps(fast.compact(accumulator))), _decoded_bytes(pickle.dumps(accumulator))
    assert packed * 5 < as_tfma, (packed, as_tfma)
