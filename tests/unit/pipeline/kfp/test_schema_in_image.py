"""The compiled spec names the schema where the image holds it (<project_root>/schema/), wherever the compiling
torchtfx is installed: its shipped schemas, found through importlib.resources, map onto the image's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.paths import PROJECT_ROOT
from torchtfx.data.config.dataset import load_dataset_config
from torchtfx.data.resources import schemas_dir
from torchtfx.pipeline.kfp.compile import dataset_in_image
from torchtfx.pipeline.kfp.config import KubeflowConfigError, load_kubeflow_settings

SETTINGS = load_kubeflow_settings(PROJECT_ROOT / "kubeflow" / "pools.yaml")


@pytest.mark.parametrize("dataset", ["taxi", "taxi_tips", "loans"])
def test_a_shipped_schema_is_read_from_the_images_project_root(dataset):
    cfg = dataset_in_image(SETTINGS, load_dataset_config(dataset))
    name = "loans" if dataset == "loans" else "taxi"
    assert cfg.schema_path == Path(SETTINGS.project_root) / "schema" / name / "schema.pbtxt"


def test_a_schema_of_ones_own_is_refused_with_the_fix(tmp_path):
    schema = tmp_path / "schema.pbtxt"
    shutil.copy(schemas_dir() / "taxi" / "schema.pbtxt", schema)
    config = tmp_path / "mine.yaml"
    config.write_text(
        (PROJECT_ROOT / "data" / "datasets" / "taxi.yaml")
        .read_text()
        .replace("schema: schema/taxi/schema.pbtxt", f"schema: {schema}")
    )
    with pytest.raises(
        KubeflowConfigError,
        match=r"the schema .*/schema\.pbtxt is not one of the shipped "
        r"schemas \(.*\), so the image does not contain it; put it under "
        r"schema/",
    ):
        dataset_in_image(SETTINGS, load_dataset_config(config))
