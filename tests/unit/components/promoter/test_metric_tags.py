"""The candidate's overall metrics as tags of its registered version: each task's own, binary's as ever."""

from __future__ import annotations

import pytest
from tfx.types import standard_artifacts

from tests.unit.pipeline.reporting import evaluations
from torchtfx.components.promoter.constants import CODE_VERSION_KEY
from torchtfx.components.promoter.executor import _tags

TAGS = {
    "binary": {
        "metric.auc": "0.700000",
        "metric.auc_precision_recall": "0.500000",
        "metric.binary_accuracy": "0.800000",
        "metric.calibration": "1.100000",
        "metric.example_count": "100.000000",
    },
    "multiclass": {
        "metric.sparse_categorical_accuracy": "0.800000",
        "metric.auc_macro": "0.900000",
        "metric.auc_micro": "0.930000",
        "metric.example_count": "105.000000",
        "metric.weighted_example_count": "100.000000",
    },
    "regression": {
        "metric.mean_squared_error": "1.100000",
        "metric.root_mean_squared_error": "1.048809",
        "metric.mean_absolute_error": "0.700000",
        "metric.squared_pearson_correlation": "0.400000",
        "metric.example_count": "105.000000",
        "metric.weighted_example_count": "100.000000",
    },
}


@pytest.mark.parametrize("task", sorted(TAGS))
def test_the_registered_version_is_tagged_with_the_candidate_s_overall_metrics(task, tmp_path):
    """Not the champion's, not the differences, not slices, not per-class values (MLflow tag names take no
    brackets); auc(macro) becomes metric.auc_macro."""
    uri = getattr(evaluations, task)(tmp_path)
    model, examples = standard_artifacts.Model(), standard_artifacts.Examples()
    model.uri, examples.span = str(tmp_path / "model"), 3
    tags = _tags(model, examples, None, uri, {CODE_VERSION_KEY: "abc123"}, "run-1", "7")
    assert {k: v for k, v in tags.items() if k.startswith("metric.")} == TAGS[task]
    assert (tags["data_span"], tags["git_commit"], tags["pipeline_run_id"]) == ("3", "abc123", "run-1")
