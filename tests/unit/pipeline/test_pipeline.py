"""The pipeline factory's choices for TFX's own components: what they skip and which hooks they call."""

from __future__ import annotations

import pytest

from torchtfx.components.shared import contracts
from torchtfx.pipeline.evaluation import EVAL_EXTRACTORS_MODULE
from torchtfx.pipeline.transform import PREPROCESSING_FN


@pytest.fixture
def components(taxi_pipeline) -> dict:
    return {component.id: component for component in taxi_pipeline.components}


def test_transform_writes_only_its_graph(components):
    """No statistics, analyzer cache or transformed examples: nothing reads the first two, and the Trainer runs
    the raw examples through the graph (pipeline/pipeline.py, components/torch_trainer/handoff/materialize.py)."""
    transform = components[contracts.TRANSFORM_ID]
    assert transform.exec_properties["disable_statistics"] == 1
    assert set(transform.outputs) == {"transform_graph"}


def test_the_trainer_reads_examplegens_examples_and_the_transform_graph(components):
    inputs = components[contracts.TRAINER_ID].inputs
    assert set(inputs) == {"examples", "transform_graph"}
    assert inputs["examples"].producer_component_id == contracts.EXAMPLE_GEN_ID
    assert inputs["transform_graph"].producer_component_id == contracts.TRANSFORM_ID


def test_the_evaluator_runs_the_trimmed_extractors(components):
    assert components[contracts.EVALUATOR_ID].exec_properties["module_path"] == EVAL_EXTRACTORS_MODULE


def test_transform_runs_preprocessing_fn_by_a_dotted_path_that_imports(components):
    """Transform's Beam workers and the Kubeflow step image import the function by this string."""
    import importlib

    from torchtfx.pipeline.transform.preprocessing import preprocessing_fn

    assert components[contracts.TRANSFORM_ID].exec_properties["preprocessing_fn"] == PREPROCESSING_FN
    module, name = PREPROCESSING_FN.rsplit(".", 1)
    assert getattr(importlib.import_module(module), name) is preprocessing_fn


def test_the_data_gate_checks_a_multiclass_label_s_classes_before_transform(components):
    from torchtfx.components.data_gate.label_classes import LabelClasses
    from torchtfx.data.config.dataset import load_dataset_config
    from torchtfx.pipeline.pipeline import _label_classes

    assert components[contracts.DATA_GATE_ID].exec_properties.get("label_classes") is None  # taxi is binary
    dataset = load_dataset_config("taxi_payment")
    checked = LabelClasses.from_json(_label_classes(dataset))
    assert (checked.column, checked.num_classes) == (dataset.label.column, dataset.label.num_classes)
