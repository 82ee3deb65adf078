"""The Evaluator's extractors: TFMA's, with each batch trimmed to the features the slices read. Compared with
TFMA's own extractors on a real converted model, one model and a candidate against a baseline."""

from __future__ import annotations

import math

import apache_beam as beam
import numpy as np
import pytest
import tensorflow_model_analysis as tfma
import torch
from tensorflow_model_analysis import constants
from tfx.components.util import udf_utils
from tfx_bsl.tfxio import tf_example_record

from tests.unit.components.torch_trainer.served_models import export_and_serve, train_briefly
from torchtfx.components.torch_trainer.modeling.zoo import mlp
from torchtfx.pipeline.evaluation import EVAL_EXTRACTORS_MODULE
from torchtfx.pipeline.evaluation import extractors as eval_extractors
from torchtfx.pipeline.evaluation.config import build_eval_config, without_gates
from torchtfx.pipeline.evaluation.extractors import custom_extractors, read_features, trimmed

BATCH_ROWS = 100


@pytest.fixture(scope="module")
def serving_model(tmp_path_factory, tiny_taxi):
    root = tmp_path_factory.mktemp("eval_extractors")
    torch.manual_seed(0)
    model = train_briefly(mlp.build(tiny_taxi.layout.model_spec(), hidden_units=(8,), max_embedding_dim=4), tiny_taxi)
    return export_and_serve(tiny_taxi, model, root / "model.onnx", root / "serving")


def _ungated(tiny) -> tfma.EvalConfig:
    """The pipeline's config without its gates: change thresholds need TFX's rubber stamp otherwise."""
    return without_gates(build_eval_config(tiny.cfg, tiny.cfg.gates))


def _metrics(config, shared, examples, out, trim: bool) -> dict:
    """TFMA's run as TFX's Evaluator makes it (examples read to Arrow, the raw record kept), in fixed batches: the
    converted network's float32 outputs change in the last bit with the batch size (1.2e-7 relative between
    batches of 1,024 and 37, measured on the taxi model), and TFMA's own read sizes batches by timing."""
    extractors = custom_extractors(shared, config) if trim else None
    source = tf_example_record.TFExampleRecord(str(examples), raw_record_column_name=constants.ARROW_INPUT_COLUMN)
    with beam.Pipeline() as pipeline:
        _ = (
            pipeline
            | source.BeamSource(batch_size=BATCH_ROWS)
            | tfma.ExtractEvaluateAndWriteResults(
                eval_shared_model=shared, eval_config=config, extractors=extractors, output_path=str(out)
            )
        )
    values = {}
    for by_slice in tfma.load_metrics(str(out)):
        for entry in by_slice.metric_keys_and_values:
            values[(str(by_slice.slice_key), str(entry.key))] = entry.value
    return values


def _assert_same(ours: dict, tfmas: dict) -> None:
    """Same slices and metric keys; the same values up to the order Beam combines partial sums in."""
    assert ours.keys() == tfmas.keys()
    for key, value in tfmas.items():
        if value.HasField("double_value"):
            mine, theirs = ours[key].double_value.value, value.double_value.value
            assert math.isclose(mine, theirs, rel_tol=1e-9) or (math.isnan(mine) and math.isnan(theirs)), key
        else:
            assert ours[key] == value, key


def test_trimmed_metrics_equal_tfmas_on_every_slice(serving_model, tiny_taxi, tmp_path):
    config = _ungated(tiny_taxi)
    shared = tfma.default_eval_shared_model(eval_saved_model_path=str(serving_model), eval_config=config)
    tfmas = _metrics(config, shared, tiny_taxi.examples_path, tmp_path / "tfma", trim=False)
    ours = _metrics(config, shared, tiny_taxi.examples_path, tmp_path / "ours", trim=True)
    assert len({slice_key for slice_key, _ in tfmas}) > 10  # the overall slice and the dataset's slices
    _assert_same(ours, tfmas)


def test_trimmed_metrics_equal_tfmas_for_a_candidate_and_its_baseline(serving_model, tiny_taxi, tmp_path):
    """Two models, as the Evaluator runs a candidate against the champion: TFMA keys features by model (the
    same SavedModel twice here: what is checked is the extracts' shape, not which model wins)."""
    config = _ungated(tiny_taxi)
    candidate = config.model_specs[0]
    candidate.name = constants.CANDIDATE_KEY
    baseline = config.model_specs.add()
    baseline.CopyFrom(candidate)
    baseline.name, baseline.is_baseline = constants.BASELINE_KEY, True
    shared = [
        tfma.default_eval_shared_model(eval_saved_model_path=str(serving_model), eval_config=config, model_name=name)
        for name in (constants.CANDIDATE_KEY, constants.BASELINE_KEY)
    ]
    tfmas = _metrics(config, shared, tiny_taxi.examples_path, tmp_path / "tfma", trim=False)
    ours = _metrics(config, shared, tiny_taxi.examples_path, tmp_path / "ours", trim=True)
    assert any("diff" in str(key) for _, key in tfmas)  # the baseline's comparison metrics
    _assert_same(ours, tfmas)


def test_the_trim_runs_just_before_tfmas_unbatching(serving_model, tiny_taxi):
    config = _ungated(tiny_taxi)
    shared = tfma.default_eval_shared_model(eval_saved_model_path=str(serving_model), eval_config=config)
    stages = [extractor.stage_name for extractor in custom_extractors(shared, config)]
    trim = stages.index(eval_extractors.TRIM_STAGE_NAME)
    assert stages[trim + 1] == "ExtractUnbatchedInputs"
    assert stages.index("ExtractPredictions") < trim and stages.index("ExtractLabels") < trim


def test_a_batch_keeps_labels_predictions_weights_and_the_sliced_features_alone():
    batch = {
        constants.INPUT_KEY: np.array([b"a", b"b"], dtype=object),
        constants.FEATURES_KEY: {"payment_type": np.array([b"Cash", b"Card"]), "fare": np.array([1.0, 2.0])},
        constants.TRANSFORMED_FEATURES_KEY: {
            constants.CANDIDATE_KEY: {"fare_xf": np.array([0.1, 0.2]), "tips_xf": np.array([0, 1])},
            constants.BASELINE_KEY: {"fare_xf": np.array([0.1, 0.2])},
        },
        constants.LABELS_KEY: np.array([0, 1]),
        constants.PREDICTIONS_KEY: np.array([0.2, 0.9]),
        constants.ARROW_RECORD_BATCH_KEY: "record batch",
    }
    out = trimmed(batch, frozenset({"payment_type", "tips_xf"}), per_model=True)
    assert set(out) == set(batch) - {constants.INPUT_KEY}
    assert set(out[constants.FEATURES_KEY]) == {"payment_type"}
    assert out[constants.TRANSFORMED_FEATURES_KEY] == {
        constants.CANDIDATE_KEY: {"tips_xf": batch[constants.TRANSFORMED_FEATURES_KEY]["candidate"]["tips_xf"]},
        constants.BASELINE_KEY: {},
    }
    assert out[constants.LABELS_KEY] is batch[constants.LABELS_KEY]
    single = trimmed(
        {constants.TRANSFORMED_FEATURES_KEY: {"tips_xf": 1, "fare_xf": 2}}, frozenset({"tips_xf"}), per_model=False
    )
    assert single == {constants.TRANSFORMED_FEATURES_KEY: {"tips_xf": 1}}


def test_read_features_are_the_slices_keys_and_values_and_a_metrics_query_key():
    config = tfma.EvalConfig(
        slicing_specs=[
            tfma.SlicingSpec(),
            tfma.SlicingSpec(feature_keys=["hour"]),
            tfma.SlicingSpec(feature_values={"company": "A"}),
        ],
        cross_slicing_specs=[
            tfma.CrossSlicingSpec(
                baseline_spec=tfma.SlicingSpec(feature_keys=["area"]),
                slicing_specs=[tfma.SlicingSpec(feature_keys=["day"])],
            )
        ],
        metrics_specs=[tfma.MetricsSpec(query_key="session")],
    )
    assert read_features(config) == {"hour", "company", "area", "day", "session"}


def test_the_evaluator_finds_the_hook_tfx_looks_up():
    """TFX's Evaluator calls ``custom_extractors`` from its ``module_path`` and quietly uses TFMA's defaults when
    the name does not resolve: a renamed module or function would lose the trim without an error."""
    hook = udf_utils.try_get_fn({"module_path": EVAL_EXTRACTORS_MODULE}, "custom_extractors")
    assert (hook.__module__, hook.__name__) == (custom_extractors.__module__, "custom_extractors")
