"""Score a pushed SavedModel with TFMA: our metrics config, the overall slice, a given eval split."""

from __future__ import annotations

from pathlib import Path

from torchtfx.components.shared.served_interface import SERVING_SIGNATURE
from torchtfx.data.config.dataset import DatasetConfig


def tfma_metrics(model_dir: Path, examples_dir: Path, model_spec, dataset: DatasetConfig, out_dir: Path) -> dict:
    """{metric name: value} on the overall slice. The metrics are exactly our pipeline's (its EvalConfig's
    metrics_specs); only the model spec differs, so the reference is scored like our candidate."""
    import tensorflow_model_analysis as tfma

    from torchtfx.components.shared.evaluation_results import metric_values
    from torchtfx.pipeline.evaluation.config import OVERALL, build_eval_config, without_gates

    # The metrics without our gates: a lone model has no baseline to compare with.
    metrics_specs = without_gates(build_eval_config(dataset, dataset.gates)).metrics_specs
    eval_config = tfma.EvalConfig(model_specs=[model_spec], slicing_specs=[OVERALL], metrics_specs=metrics_specs)
    shared = tfma.default_eval_shared_model(eval_saved_model_path=str(model_dir), eval_config=eval_config)
    tfma.run_model_analysis(
        eval_shared_model=shared,
        eval_config=eval_config,
        data_location=str(examples_dir / "*.gz"),
        file_format="tfrecords",
        output_path=str(out_dir),
    )
    return {
        metric: value
        for (slice_, metric, _model, is_diff), value in metric_values(str(out_dir)).items()
        if slice_ == "Overall" and not is_diff
    }


def our_model_spec(dataset: DatasetConfig):
    from torchtfx.pipeline.evaluation.config import build_eval_config

    return build_eval_config(dataset, dataset.gates).model_specs[0]


def reference_model_spec(label_key: str, preprocessing: str):
    import tensorflow_model_analysis as tfma

    return tfma.ModelSpec(
        signature_name=SERVING_SIGNATURE, label_key=label_key, preprocessing_function_names=[preprocessing]
    )
