"""The TFMA EvalConfig built from a dataset config and its gates: what is measured, on which slices, and
which thresholds bless a candidate."""

from __future__ import annotations

import pytest
import tensorflow_model_analysis as tfma

from tests.paths import PROJECT_ROOT
from torchtfx.components.shared.evaluation_results import metric_label
from torchtfx.data.config.dataset import load_dataset_config
from torchtfx.data.config.gates import GateConfig
from torchtfx.data.config.metrics import EVALUATED
from torchtfx.data.config.task import BINARY
from torchtfx.pipeline.evaluation.config import METRIC_RESOLUTION, build_eval_config, without_gates
from torchtfx.pipeline.evaluation.metrics import FROM_HISTOGRAM

TFMA_CLASS = {ours: tfma_class for tfma_class, ours in FROM_HISTOGRAM.items()}


def _metrics(config: tfma.EvalConfig) -> dict[str, tfma.MetricConfig]:
    """By TFMA's class name: ours (pipeline/evaluation/metrics.py) stand for TFMA's, same keys and values."""
    (spec,) = config.metrics_specs
    return {TFMA_CLASS.get(m.class_name, m.class_name): m for m in spec.metrics}


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
    assert {m.tfma_class for m in EVALUATED[BINARY].reported} <= set(metrics)
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
    names = [m.class_name for m in config.metrics_specs[0].metrics]
    assert names.count("HistogramPrecision") == 1  # bounded, not twice


def test_per_slice_auc_drops_are_change_thresholds_on_those_slices(taxi_cfg):
    gates = GateConfig(slice_max_auc_drop={"payment_type": 0.05, "payment_type=Cash": 0.02})
    auc = _metrics(build_eval_config(taxi_cfg, gates))["AUC"]
    by_slice = {str(t.slicing_specs[0]).strip(): t.threshold for t in auc.per_slice_thresholds[1:]}
    assert len(by_slice) == 2
    drops = sorted(t.change_threshold.absolute.value for t in by_slice.values())
    assert drops == [-0.05, -0.02]
    assert any(t.slicing_specs[0].feature_values == {"payment_type": "Cash"} for t in auc.per_slice_thresholds)
    assert any(list(t.slicing_specs[0].feature_keys) == ["payment_type"] for t in auc.per_slice_thresholds)


# -- multiclass and regression: the metric specs run by TFMA itself, on hand-computable rows --------------------
def _computed(dataset, gates, frame, tmp_path):
    """TFMA's own metrics and validation on ``frame`` (columns label, prediction, weight), no model."""
    from torchtfx.pipeline.evaluation.config import build_metrics_specs

    spec = tfma.ModelSpec(label_key="label", prediction_key="prediction")
    if "weight" in frame:
        spec.example_weight_key = "weight"
    specs = build_metrics_specs(dataset, gates)
    for metric in (m for s in specs for m in s.metrics):  # no champion here: TFMA refuses change thresholds
        for per_slice in metric.per_slice_thresholds:
            per_slice.threshold.ClearField("change_threshold")
    config = tfma.EvalConfig(model_specs=[spec], slicing_specs=[tfma.SlicingSpec()], metrics_specs=specs)
    tfma.analyze_raw_data(frame, config, output_path=str(tmp_path))
    values = {}
    for per_slice in tfma.load_metrics(str(tmp_path)):
        for kv in per_slice.metric_keys_and_values:
            sub = kv.key.sub_key.class_id.value if kv.key.sub_key.HasField("class_id") else None
            aggregation = "macro" if kv.key.aggregation_type.macro_average else None
            aggregation = "micro" if kv.key.aggregation_type.micro_average else aggregation
            if kv.value.HasField("double_value"):
                values[(kv.key.name, sub, aggregation)] = kv.value.double_value.value
    failed = sorted(
        {
            metric_label(f.metric_key)
            for s in tfma.load_validation_result(str(tmp_path)).metric_validations_per_slice
            for f in s.failures
        }
    )
    return values, failed


def _multiclass_frame():
    import numpy as np
    import pandas as pd

    # Class 2's one-vs-rest AUC is 0.5 (its row scores 0.1, like two of the others): below the 0.7 macro floor
    # alone, while the macro average, (1 + 1 + 0.5) / 3, is above it.
    rows = [
        ([0.7, 0.2, 0.1], 0, 1.0),
        ([0.2, 0.7, 0.1], 1, 1.0),
        ([0.5, 0.4, 0.1], 2, 1.0),
        ([0.1, 0.8, 0.1], 1, 1.0),
        ([0.1, 0.1, 0.8], 0, 0.0),
    ]
    return pd.DataFrame(
        {
            "prediction": [np.array(p) for p, _, _ in rows],
            "label": [y for _, y, _ in rows],
            "weight": [w for *_, w in rows],
        }
    )


def test_multiclass_accuracy_per_class_recall_and_averaged_auc_with_refused_rows_weighted_out(tmp_path):
    dataset = load_dataset_config("taxi_payment")
    values, failed = _computed(dataset, GateConfig(accuracy_floor=0.8), _multiclass_frame(), tmp_path)
    # 3 of the 4 weighted rows are right; the weight-0 row (predicted 2, label 0) would make it 3 of 5.
    assert values[("sparse_categorical_accuracy", None, None)] == pytest.approx(0.75)
    assert values[("weighted_example_count", None, None)] == pytest.approx(4.0)
    assert values[("recall", 0, None)] == pytest.approx(1.0) and values[("recall", 2, None)] == pytest.approx(0.0)
    assert values[("auc", 2, None)] == pytest.approx(0.5, abs=0.01)
    assert values[("auc", None, "macro")] == pytest.approx(2.5 / 3, abs=0.01)
    assert ("auc", None, "micro") in values and ("auc", 1, None) in values
    # 0.75 < the 0.8 accuracy floor; the macro floor judges the average (0.83), not class 2's 0.5
    assert failed == ["sparse_categorical_accuracy"]


def test_multiclass_gates_are_an_accuracy_drop_and_a_macro_auc_floor():
    specs = build_eval_config(load_dataset_config("taxi_payment"), GateConfig()).metrics_specs
    accuracy = next(m for s in specs for m in s.metrics if m.class_name == "SparseCategoricalAccuracy")
    (threshold,) = accuracy.per_slice_thresholds
    change = threshold.threshold.change_threshold
    assert change.absolute.value == -0.01 and change.direction == tfma.MetricDirection.HIGHER_IS_BETTER
    assert not threshold.threshold.HasField("value_threshold")  # no accuracy floor unless configured
    macro = next(s for s in specs if s.aggregate.macro_average)
    assert macro.metrics[0].per_slice_thresholds[0].threshold.value_threshold.lower_bound.value == 0.7
    assert not macro.HasField("binarize") and sorted(macro.aggregate.class_weights) == [0, 1, 2]


def test_regression_error_metrics_lower_is_better_and_a_correlation_floor(tmp_path):
    import pandas as pd

    dataset = load_dataset_config("taxi_tips")
    frame = pd.DataFrame(
        {
            "label": [1.0, 2.0, 3.0, 4.0, 100.0],
            "prediction": [1.5, 2.0, 2.0, 5.0, 0.0],
            "weight": [1.0, 1.0, 1.0, 1.0, 0.0],
        }
    )
    values, failed = _computed(dataset, GateConfig(mse_ceiling=0.5), frame, tmp_path)
    assert values[("mean_squared_error", None, None)] == pytest.approx((0.25 + 0 + 1 + 1) / 4)
    assert values[("mean_absolute_error", None, None)] == pytest.approx((0.5 + 0 + 1 + 1) / 4)
    assert values[("root_mean_squared_error", None, None)] == pytest.approx((2.25 / 4) ** 0.5)
    assert failed == ["mean_squared_error"]  # 0.5625 above the 0.5 ceiling
    mse = next(
        m
        for m in build_eval_config(dataset, GateConfig()).metrics_specs[0].metrics
        if m.class_name == "MeanSquaredError"
    )
    change = mse.per_slice_thresholds[0].threshold.change_threshold
    assert change.relative.value == 0.05 and change.direction == tfma.MetricDirection.LOWER_IS_BETTER


def test_model_spec_per_task_uses_the_eval_label_the_prediction_output_and_the_label_weight():
    (multi,) = build_eval_config(load_dataset_config("taxi_payment"), GateConfig()).model_specs
    assert (multi.label_key, multi.prediction_key) == ("payment_class_xf", "probabilities")
    assert multi.example_weight_key == "payment_class_weight_xf"
    (reg,) = build_eval_config(load_dataset_config("taxi_tips"), GateConfig()).model_specs
    assert (reg.label_key, reg.prediction_key) == ("tip_dollars_original_xf", "predictions")
    assert reg.example_weight_key == "tip_dollars_weight_xf"


def test_binary_eval_config_is_what_it_was_before_tasks(taxi_cfg):
    """The golden Kubeflow spec holds the binary EvalConfig: one MetricsSpec, no example weight, same order."""
    config = build_eval_config(taxi_cfg, GateConfig())
    (spec,) = config.model_specs
    assert not spec.example_weight_key and spec.label_key == taxi_cfg.label_key
    (metrics_spec,) = config.metrics_specs
    assert not metrics_spec.HasField("binarize") and not metrics_spec.HasField("aggregate")
    assert [m.class_name for m in metrics_spec.metrics] == [
        "HistogramAUC",
        "HistogramCalibration",
        "ExampleCount",
        "HistogramAUCPrecisionRecall",
        "HistogramBinaryAccuracy",
        "HistogramPrecision",
        "HistogramRecall",
        "HistogramCalibrationPlot",
    ]


def test_multiclass_micro_auc_pools_every_class_s_rows(tmp_path):
    """Micro AUC over the 4 weighted rows x 3 classes: 4 positives, 8 negatives; the positive scored 0.2 beats
    the four 0.1 negatives and ties the two 0.2 ones (half each): (3 * 8 + 4 + 1) / 32."""
    import numpy as np
    import pandas as pd

    frame = pd.DataFrame(
        {
            "label": [0, 1, 2, 1],
            "weight": [1.0] * 4,
            "prediction": [np.array(p) for p in ([0.7, 0.2, 0.1], [0.2, 0.7, 0.1], [0.5, 0.3, 0.2], [0.1, 0.8, 0.1])],
        }
    )
    values, failed = _computed(load_dataset_config("taxi_payment"), GateConfig(), frame, tmp_path)
    assert values[("auc", None, "micro")] == pytest.approx(29 / 32, abs=1e-3)
    assert values[("auc", None, "macro")] == pytest.approx(1.0, abs=1e-3) and failed == []


def test_multiclass_recall_floor_holds_for_every_class_and_names_the_class(tmp_path):
    """`value_floors: {recall: 0.5}` on a multiclass task: class 2's recall 0 fails, classes 0 and 1 pass."""
    values, failed = _computed(
        load_dataset_config("taxi_payment"), GateConfig(value_floors={"recall": 0.5}), _multiclass_frame(), tmp_path
    )
    assert values[("recall", 1, None)] == pytest.approx(1.0)
    assert failed == ["recall[class_id=2]"]


def test_regression_squared_correlation_is_weighted_and_error_ceilings_are_upper_bounds(tmp_path):
    import pandas as pd

    dataset = load_dataset_config("taxi_tips")
    frame = pd.DataFrame(
        {
            "label": [1.0, 2.0, 3.0, 4.0, 100.0],
            "prediction": [1.5, 2.0, 2.0, 5.0, 0.0],
            "weight": [1.0, 1.0, 1.0, 1.0, 0.0],
        }
    )
    gates = GateConfig(squared_correlation_floor=0.75, value_ceilings={"mean_absolute_error": 0.6})
    values, failed = _computed(dataset, gates, frame, tmp_path)
    # r = cov / (sd_y sd_p) on the 4 weighted rows: 5.25 / sqrt(5 * 7.6875)
    assert values[("squared_pearson_correlation", None, None)] == pytest.approx(5.25**2 / (5 * 7.6875))
    assert failed == ["mean_absolute_error", "squared_pearson_correlation"]  # MAE 0.625 > 0.6; r2 0.717 < 0.75


# -- change thresholds against a champion, decided by TFMA itself ------------------------------------------------
def _judged(dataset, gates, frame, tmp_path, monkeypatch):
    """The promoter's view of TFMA's verdict on a candidate (column ``prediction``) against a champion
    (column ``champion``), both scored on the same rows, with every gate of the task, change gates included.

    TFMA decides whether a baseline exists from the models it is given; raw data has none, so the test tells
    it there is one (as TFX does when it passes the champion as ``baseline``)."""
    from tensorflow_model_analysis.api import model_eval_lib
    from tensorflow_model_analysis.utils import config_util

    from torchtfx.components.shared import evaluation_results
    from torchtfx.pipeline.evaluation.config import build_metrics_specs

    monkeypatch.setattr(
        model_eval_lib,
        "_update_eval_config_with_defaults",
        lambda config, _models: config_util.update_eval_config_with_defaults(config, has_baseline=True),
    )
    weight = {"example_weight_key": "weight"} if "weight" in frame else {}
    candidate = tfma.ModelSpec(name="candidate", label_key="label", prediction_key="prediction", **weight)
    champion = tfma.ModelSpec(
        name=evaluation_results.BASELINE_MODEL_NAME,
        label_key="label",
        prediction_key="champion",
        is_baseline=True,
        **weight,
    )
    config = tfma.EvalConfig(
        model_specs=[candidate, champion],
        slicing_specs=[tfma.SlicingSpec()],
        metrics_specs=build_metrics_specs(dataset, gates),
    )
    tfma.analyze_raw_data(frame, config, output_path=str(tmp_path))
    return evaluation_results.gate_failures(str(tmp_path))


@pytest.mark.parametrize(("worse", "rejected"), [(1.04, False), (1.10, True)])
def test_a_regression_candidate_worse_than_the_champion_by_more_than_max_mse_increase_is_rejected(
    worse, rejected, tmp_path, monkeypatch
):
    """Champion MSE 0.5 on the weighted rows; the candidate's errors are scaled so that its MSE is 4% or 10%
    worse: 4% passes the default 5% limit, 10% is rejected naming mean_squared_error. The weight-0 row (a
    refused target, predicted wildly by the candidate only) counts for nothing."""
    import pandas as pd

    labels = [1.0, 2.0, 3.0, 4.0, 50.0]
    champion = [2.0, 2.0, 3.0, 3.0, 50.0]  # errors 1, 0, 0, -1: MSE 0.5
    scale = worse**0.5
    candidate = [y + scale * (p - y) for y, p in zip(labels[:4], champion[:4], strict=True)] + [0.0]
    frame = pd.DataFrame(
        {"label": labels, "prediction": candidate, "champion": champion, "weight": [1.0, 1.0, 1.0, 1.0, 0.0]}
    )
    failures = _judged(load_dataset_config("taxi_tips"), GateConfig(), frame, tmp_path, monkeypatch)
    if not rejected:
        assert failures == []
        return
    (failure,) = failures
    assert (failure.metric, failure.slice, failure.is_change) == ("mean_squared_error", "Overall", True)
    assert failure.candidate == pytest.approx(0.55) and failure.champion == pytest.approx(0.5)
    assert failure.threshold == "candidate / champion - 1 <= 0.05"
    assert failure.line().startswith("mean_squared_error Overall")


@pytest.mark.parametrize(("max_drop", "rejected"), [(0.3, False), (0.01, True)])
def test_a_multiclass_candidate_less_accurate_than_the_champion_by_more_than_max_accuracy_drop_is_rejected(
    max_drop, rejected, tmp_path, monkeypatch
):
    """The candidate gets 3 of 4 weighted rows right, the champion all 4: a 0.25 drop."""
    import numpy as np

    frame = _multiclass_frame()
    frame["champion"] = [
        np.array(p) for p in ([0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8])
    ]
    gates = GateConfig(max_accuracy_drop=max_drop)
    failures = _judged(load_dataset_config("taxi_payment"), gates, frame, tmp_path, monkeypatch)
    if not rejected:
        assert failures == []
        return
    (failure,) = failures
    assert (failure.metric, failure.is_change) == ("sparse_categorical_accuracy", True)
    assert (failure.candidate, failure.champion) == (pytest.approx(0.75), pytest.approx(1.0))
    assert failure.threshold == "candidate - champion >= -0.01"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # TFMA's AUC-PR interpolation on 4 rows divides by 0
def test_a_binary_candidate_with_an_auc_drop_beyond_max_auc_drop_is_still_rejected(tmp_path, monkeypatch):
    """Candidate AUC 0.75 (one of four pairs misordered), champion 1.0."""
    import pandas as pd

    frame = pd.DataFrame(
        {"label": [0.0, 1.0, 1.0, 0.0], "prediction": [0.2, 0.8, 0.4, 0.6], "champion": [0.2, 0.8, 0.6, 0.4]}
    )
    failures = _judged(load_dataset_config("taxi"), GateConfig(), frame, tmp_path, monkeypatch)
    assert [(f.metric, f.is_change, f.threshold) for f in failures] == [("auc", True, "candidate - champion >= -0.01")]
    assert (failures[0].candidate, failures[0].champion) == (pytest.approx(0.75, abs=1e-3), pytest.approx(1.0))


@pytest.mark.parametrize("dataset", ["taxi", "taxi_payment"])
def test_curve_metrics_use_1000_thresholds_and_a_100_bucket_calibration_plot(dataset):
    """TFMA's defaults (10,000 thresholds, 1,000 buckets) cost every slice; 1,000 thresholds measured as exact."""
    cfg = load_dataset_config(dataset)
    configs = [
        (m.class_name, m.config) for spec in build_eval_config(cfg, cfg.gates).metrics_specs for m in spec.metrics
    ]
    curves = [(TFMA_CLASS.get(name, name), config) for name, config in configs]
    curves = [(name, config) for name, config in curves if name in ("AUC", "AUCPrecisionRecall", "CalibrationPlot")]
    assert curves and all(config == METRIC_RESOLUTION[name] for name, config in curves)


def test_metrics_from_the_auc_histogram_equal_tfma_s_own_and_calibration_is_gated_by_the_band(tmp_path):
    """Our Calibration, accuracy, precision, recall and AUC (pipeline/evaluation/metrics.py) against TFMA's on the same
    rows: same values under the same keys, from one histogram without TFMA's two extra passes; a model that
    predicts twice the base rate fails the default calibration band under the metric's own name."""
    import numpy as np
    import pandas as pd
    from tensorflow_model_analysis.metrics import calibration, metric_specs

    from torchtfx.pipeline.evaluation import EVAL_METRICS_MODULE
    from torchtfx.pipeline.evaluation.metrics import FROM_HISTOGRAM

    rng = np.random.default_rng(3)
    label = (rng.random(3000) < 0.3).astype(float)
    frame = pd.DataFrame({"label": label, "prediction": np.clip(0.3 * label + 0.5 * rng.random(3000), 0, 1)})
    spec = tfma.ModelSpec(label_key="label", prediction_key="prediction")
    values, combiners = {}, {}
    for module in ("", EVAL_METRICS_MODULE):
        metrics = [
            tfma.MetricConfig(class_name=FROM_HISTOGRAM[n] if module else n, module=module)
            for n in ("Calibration", "BinaryAccuracy", "Precision", "Recall", "AUC")
        ]
        metrics[-1].config = '"num_thresholds": 1000'
        config = tfma.EvalConfig(model_specs=[spec], metrics_specs=[tfma.MetricsSpec(metrics=metrics)])
        computations = metric_specs.to_computations(config.metrics_specs, eval_config=config)
        combiners[module] = {type(c.combiner).__name__ for c in computations if hasattr(c, "combiner")}
        out = tmp_path / (module or "tfma")
        tfma.analyze_raw_data(frame, config, output_path=str(out))
        (overall,) = tfma.load_metrics(str(out))
        values[module] = {kv.key.name: kv.value.double_value.value for kv in overall.metric_keys_and_values}
    assert len(combiners[""]) == 3 and combiners[EVAL_METRICS_MODULE] == {"ScalarHistogramCombiner"}  # once
    assert calibration._WeightedLabelsPredictionsExamplesCombiner.__name__ in combiners[""]
    assert values[EVAL_METRICS_MODULE].keys() == values[""].keys()
    for name, value in values[""].items():
        assert values[EVAL_METRICS_MODULE][name] == pytest.approx(value, rel=1e-12), name
    positive, label = frame.prediction.to_numpy() > 0.5, frame.label.to_numpy() == 1
    assert values[EVAL_METRICS_MODULE]["calibration"] == pytest.approx(frame.prediction.sum() / frame.label.sum())
    assert values[EVAL_METRICS_MODULE]["precision"] == pytest.approx(label[positive].mean())
    assert values[EVAL_METRICS_MODULE]["recall"] == pytest.approx(positive[label].mean())

    frame["prediction"] = np.clip(frame.prediction * 2, 0, 1)
    _, failed = _computed(load_dataset_config("taxi"), GateConfig(), frame, tmp_path / "twice")
    assert "calibration" in failed


def test_without_gates_is_a_copy_with_the_same_metrics_and_no_thresholds(taxi_cfg):
    gated = build_eval_config(taxi_cfg, taxi_cfg.gates)
    before = gated.SerializeToString()
    ungated = without_gates(gated)
    assert gated.SerializeToString() == before  # the pipeline's config is left as it was
    metrics = [m for spec in ungated.metrics_specs for m in spec.metrics]
    assert [m.class_name for m in metrics] == [m.class_name for spec in gated.metrics_specs for m in spec.metrics]
    assert any(m.HasField("threshold") or m.per_slice_thresholds for spec in gated.metrics_specs for m in spec.metrics)
    assert not any(m.HasField("threshold") or m.per_slice_thresholds for m in metrics)
    assert ungated.model_specs == gated.model_specs and ungated.slicing_specs == gated.slicing_specs
