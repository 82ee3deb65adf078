"""The pipeline factory's choices for TFX's own components: what they skip and which hooks they call."""

from __future__ import annotations

import pytest

from torchtfx.components.shared import contracts
from torchtfx.pipeline.pipeline import EVAL_EXTRACTORS_MODULE


@pytest.fixture
def components(taxi_pipeline) -> dict:
    return {component.id: component for component in taxi_pipeline.components}


def test_transform_writes_neither_statistics_nor_an_analyzer_cache(components):
    """Nothing reads them; the cache alone cost 3.5 s of Transform's 19 s on taxi (pipeline/pipeline.py)."""
    transform = components[contracts.TRANSFORM_ID]
    assert transform.exec_properties["disable_statistics"] == 1
    assert set(transform.outputs) == {"transform_graph", "transformed_examples"}  # no updated_analyzer_cache


def test_the_evaluator_runs_the_trimmed_extractors(components):
    assert components[contracts.EVALUATOR_ID].exec_properties["module_path"] == EVAL_EXTRACTORS_MODULE
