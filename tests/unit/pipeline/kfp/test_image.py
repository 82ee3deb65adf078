"""The step image's Dockerfile, checked statically (no Docker daemon runs on these machines): pinned TFX 1.16
base, the same constraints as local runs, the project installed so module code imports, non-root, and the
embedded data where kubeflow/pools.yaml expects it."""

from __future__ import annotations

import re

import yaml

from tests.paths import PROJECT_ROOT

DOCKERFILE = (PROJECT_ROOT / "kubeflow" / "Dockerfile").read_text()


def test_base_is_tfx_1_16_and_dependencies_come_from_the_constraints_file():
    assert re.search(r"^ARG TFX_IMAGE=gcr\.io/tfx-oss-public/tfx:1\.16\.0$", DOCKERFILE, re.M)
    assert "FROM ${TFX_IMAGE}" in DOCKERFILE
    assert "pip install -r requirements.in -c constraints.txt" in DOCKERFILE and "pip check" in DOCKERFILE
    # The project is installed as in `make` (PEP 660 editable, so the torchtfx.* namespace maps onto the folders).
    makefile = (PROJECT_ROOT / "Makefile").read_text()
    install = re.search(r"pip install --quiet (--no-deps .* -e \.)$", makefile, re.M).group(1)
    assert f"pip install {install}" in DOCKERFILE


def test_the_image_imports_the_modules_the_compiled_spec_runs():
    from torchtfx.pipeline.kfp.compile import ENTRYPOINT_COMMAND

    entrypoint = ENTRYPOINT_COMMAND[-1]
    assert f"import {entrypoint}," in DOCKERFILE and f'"-m", "{entrypoint}"' in DOCKERFILE


def test_runs_as_a_non_root_user():
    users = re.findall(r"^USER\s+(\S+)", DOCKERFILE, re.M)
    assert users and users[-1].split(":")[0] not in ("root", "0")


def test_paths_match_the_pool_configuration():
    pools = yaml.safe_load((PROJECT_ROOT / "kubeflow" / "pools.yaml").read_text())
    assert re.search(rf"^ARG PROJECT_ROOT={re.escape(pools['project_root'])}$", DOCKERFILE, re.M)
    embedded = pools["data_root"].removeprefix(pools["project_root"] + "/")
    assert f'Path("{embedded}")' in DOCKERFILE
    for folder in ("pipeline", "components", "data", "schema"):
        assert f"COPY {folder}/ {folder}/" in DOCKERFILE


def test_every_torchtfx_name_the_image_build_imports_exists():
    """The build's Python steps import torchtfx modules by dotted path; a module move (issue #42) once left
    ``from torchtfx.data.sources import default_data_dir`` there, which only a docker build would have found."""
    import importlib

    modules = re.findall(r"import ((?:torchtfx\.[\w.]+(?:, )?)+)", DOCKERFILE)
    names = re.findall(r"^from (torchtfx\.[\w.]+) import ([\w, ]+)$", DOCKERFILE, re.M)
    assert modules and names  # the patterns still match the Dockerfile
    for group in modules:
        for module in group.split(", "):
            importlib.import_module(module)
    for module, imported in names:
        for name in imported.split(", "):
            assert hasattr(importlib.import_module(module), name), f"{module}.{name}"
