"""The TFMA EvalConfig built from a dataset config and its gates: what is measured, on which slices, and
which thresholds bless a candidate."""

from __future__ import annotations

import tensorflow_model_analysis as tfma

from torchtfx.data.config.dataset import PROJECT_ROOT, load_dataset_config
from torchtfx.data.config.gates import GateConfig
from torchtfx.pipeline.eval_config import REPORTED_METRICS, build_eval_config


def _metrics(config: tfma.EvalConfig) -> dict[str, tfma.MetricConfig]:
    (spec,) = config.metrics_specs
    return {m.class_name: m for m in spec.metrics}


def _bounds(metric: tfma.MetricConfig) -> tuple[float | None, float | None]:
    (per_slice,) = metric.per_slice_thresholds
    value = per_slice.threshold.value_threshold
    low = value.lower_bound.value if value.HasField("lower_bound") else None
    high = value.upper_bound.value if value.HasField("upper_bound") else None
    return low, high


def test_model_spec_reads_the_serving_signature_and_the_transformed_label(taxi_cfg):
    (spec,) = build_eval_config(taxi_cfg, GateConfig()).model_specs
    assert spec.signature_name == "serving_default" and list(spec.preprocessing_function_names) == [
        "transform_features"
    ]
    assert spec.label_key == "big_tipper_xf" and spec.prediction_key == "probabilities"


def test_overall_plus_every_configured_slice(taxi_cfg):
    config = build_eval_config(taxi_cfg, GateConfig())
    assert config.slicing_specs[0] == tfma.SlicingSpec()
    assert [list(s.feature_keys) for s in config.slicing_specs[1:]] == [list(s) for s in taxi_cfg.slices]


def test_default_gates_are_an_auc_floor_and_drop_and_a_calibration_band(taxi_cfg):
    metrics = _metrics(build_eval_config(taxi_cfg, GateConfig()))
    (auc,) = metrics["AUC"].per_slice_thresholds
    assert list(auc.slicing_specs) == [tfma.SlicingSpec()]  # tiny slices have no stable AUC
    assert auc.threshold.value_threshold.lower_bound.value == 0.75
    change = auc.threshold.change_threshold
    assert change.absolute.value == -0.01 and change.direction == tfma.MetricDirection.HIGHER_IS_BETTER
    assert _bounds(metrics["Calibration"]) == (0.75, 1.25)
    assert set(REPORTED_METRICS) <= set(metrics)
    assert not metrics["Precision"].per_slice_thresholds  # reported, not gated


def test_a_metric_floor_from_the_dataset_yaml_becomes_a_tfma_lower_bound(tmp_path):
    """`gates: {value_floors: {precision: 0.5}}` in the dataset YAML: parsed once, a TFMA lower bound."""
    yaml_path = tmp_path / "taxi.yaml"
    yaml_path.write_text(
        (PROJECT_ROOT / "data" / "datasets" / "taxi.yaml").read_text()
        + "gates:\n  value_floors: {precision: 0.5}\n  value_ceilings: {recall: 0.99, binary_accuracy: 0.999}\n"
    )
    dataset = load_dataset_config(yaml_path)
    config = build_eval_config(dataset, dataset.gates)
    metrics = _metrics(config)
    assert _bounds(metrics["Precision"]) == (0.5, None)
    assert _bounds(metrics["Recall"]) == (None, 0.99)
    assert _bounds(metrics["BinaryAccuracy"]) == (None, 0.999)
    assert [m.class_name for m in config.metrics_specs[0].metrics].count("Precision") == 1  # bounded, not twice


def test_per_slice_auc_drops_are_change_thresholds_on_those_slices(taxi_cfg):
    gates = GateConfig(slice_max_auc_drop={"payment_type": 0.05, "payment_type=Cash": 0.02})
    auc = _metrics(build_eval_config(taxi_cfg, gates))["AUC"]
    by_slice = {str(t.slicing_specs[0]).strip(): t.threshold for t in auc.per_slice_thresholds[1:]}
    assert len(by_slice) == 2
    drops = sorted(t.change_threshold.absolute.value for t in by_slice.values())
    assert drops == [-0.05, -0.02]
    assert any(t.slicing_specs[0].feature_values == {"payment_type": "Cash"} for t in auc.per_slice_thresholds)
    assert any(list(t.slicing_specs[0].feature_keys) == ["payment_type"] for t in auc.per_slice_thresholds)
