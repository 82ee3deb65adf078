"""The shipped files (curated schemas, dataset YAMLs) through importlib.resources, and setup.py shipping them."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from tests.paths import PROJECT_ROOT
from torchtfx.data import resources
from torchtfx.data.config.dataset import DatasetConfigError, load_dataset_config

SHIPPED_DATASETS = sorted(p.stem for p in (PROJECT_ROOT / "data" / "datasets").glob("*.yaml"))


def test_in_a_checkout_the_packages_are_the_repository_folders():
    """An editable install maps torchtfx.schema onto schema/: the paths (and so Transform's cache key and the
    compiled Kubeflow spec) are the ones of before."""
    assert resources.schemas_dir() == PROJECT_ROOT / "schema"
    assert resources.datasets_dir() == PROJECT_ROOT / "data" / "datasets"
    assert resources.source_checkout() == PROJECT_ROOT
    assert resources.shipped_schemas() == ["loans", "movie_reviews", "taxi"]


@pytest.mark.parametrize("name", SHIPPED_DATASETS)
def test_every_shipped_dataset_loads_with_a_shipped_schema(name):
    cfg = load_dataset_config(name)
    assert cfg.schema_path.parent.parent == resources.schemas_dir() and cfg.schema_path.is_file()


def test_a_relative_schema_path_names_the_shipped_file():
    assert resources.shipped_schema("schema/taxi/schema.pbtxt") == resources.schemas_dir() / "taxi" / "schema.pbtxt"
    assert resources.shipped_schema(Path("schema/./loans/schema.pbtxt")).parent.name == "loans"


@pytest.mark.parametrize(
    ("relative", "message"),
    [
        ("../../etc/passwd", "'schema' '../../etc/passwd' points outside the shipped schemas"),
        ("schema/../../x.pbtxt", "points outside the shipped schemas"),
        (
            "data/datasets/taxi.yaml",
            r"a relative path names a shipped schema, schema/<dataset>/schema.pbtxt \(shipped: "
            r"loans, movie_reviews, taxi\); give an absolute path",
        ),
        ("schema", "a relative path names a shipped schema"),
    ],
)
def test_a_relative_schema_path_outside_the_shipped_schemas_is_refused_with_the_fix(relative, message):
    with pytest.raises(ValueError, match=message):
        resources.shipped_schema(relative)


def test_a_dataset_yaml_with_a_relative_path_that_is_no_shipped_schema_is_refused(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        (PROJECT_ROOT / "data" / "datasets" / "taxi.yaml")
        .read_text()
        .replace("schema: schema/taxi/schema.pbtxt", "schema: my/schema.pbtxt")
    )
    with pytest.raises(DatasetConfigError, match=r"'schema' 'my/schema\.pbtxt': a relative path names a shipped"):
        load_dataset_config(path)


def test_an_unknown_dataset_name_lists_the_shipped_ones_and_the_alternative():
    with pytest.raises(
        DatasetConfigError,
        match=r"'nope' is not shipped with torchtfx \(known datasets: loans, .*"
        r"taxi_tips\); give the path of a dataset YAML",
    ):
        load_dataset_config("nope")


def test_a_missing_yaml_path_is_named(tmp_path):
    with pytest.raises(DatasetConfigError, match=r"dataset config .*missing\.yaml not found; known datasets: loans"):
        load_dataset_config(tmp_path / "missing.yaml")


def test_a_zipped_package_is_refused_by_name(tmp_path, monkeypatch):
    """TFX reads schemas by path: a package that is no folder on disk (a zip import) cannot serve them."""
    import zipfile

    archive = tmp_path / "zipped.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("zipped_pkg/__init__.py", "")
    monkeypatch.syspath_prepend(str(archive))
    with pytest.raises(resources.PackagedFileError, match="zipped_pkg is not installed as files on disk"):
        resources.package_folder("zipped_pkg")


def _setup_arguments(monkeypatch) -> dict:
    """What setup.py passes to setuptools.setup, run as pip runs it (from its folder)."""
    import setuptools

    captured: dict = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: captured.update(kwargs))
    monkeypatch.chdir(PROJECT_ROOT)
    runpy.run_path(str(PROJECT_ROOT / "setup.py"))
    return captured


def test_setup_ships_the_schemas_and_dataset_yamls_and_lists_only_files_that_exist(monkeypatch):
    setup = _setup_arguments(monkeypatch)
    assert "torchtfx.schema" in setup["packages"] and setup["package_dir"]["torchtfx.schema"] == "schema"
    shipped = set()
    for package, patterns in setup["package_data"].items():
        folder = PROJECT_ROOT / setup["package_dir"][package]
        for pattern in patterns:
            found = {p.relative_to(PROJECT_ROOT).as_posix() for p in folder.glob(pattern)}
            assert found, f"{package}: {pattern} matches no file in {folder}"
            shipped |= found
    expected = {
        *(f"schema/{name}/schema.pbtxt" for name in resources.shipped_schemas()),
        *(f"data/datasets/{name}.yaml" for name in SHIPPED_DATASETS),
    }
    assert shipped == expected
