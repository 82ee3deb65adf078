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
