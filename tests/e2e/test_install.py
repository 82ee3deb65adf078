"""The product as a user installs it: an sdist of this checkout, built into a wheel and installed (not editable)
into a fresh virtual environment, then its ``torchtfx run`` console script from an empty folder on the shipped
taxi dataset. Nothing may come from the repository: the schemas, dataset YAMLs and code are the installed ones.

The fresh environment sees the pinned third-party stack of the test's own environment through a ``.pth`` line
(nothing is downloaded); a plain path line runs no ``.pth`` file of that folder, so the checkout's editable
torchtfx is not on its path.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests import helpers
from tests.e2e.test_pipeline import ALL_NODES
from tests.paths import PROJECT_ROOT

pytestmark = pytest.mark.e2e

STACK = Path(sysconfig.get_paths()["purelib"])  # the test environment's site-packages: the pinned stack
# What a fresh clone lacks (.gitignore): environments, build outputs, runs and caches.
NOT_IN_A_CLONE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "__pycache__",
    "*.pyc",
    "*.egg-info",
    "build",
    "dist",
    "runs",
    "tfx_root",
    ".tmp",
    ".whl",
    ".gl",
    ".pytest_cache",
    ".ruff_cache",
)
SHIPPED = (
    "torchtfx/schema/taxi/schema.pbtxt",
    "torchtfx/schema/loans/schema.pbtxt",
    "torchtfx/schema/movie_reviews/schema.pbtxt",
    "torchtfx/data/datasets/taxi.yaml",
)
PROBE = """
import json, torchtfx.data.resources as r, torchtfx.pipeline.cli.main as cli
from torchtfx.data.config.dataset import load_dataset_config
print(json.dumps({"cli": cli.__file__, "schemas": str(r.schemas_dir()), "datasets": str(r.datasets_dir()),
                  "checkout": r.source_checkout() and str(r.source_checkout()),
                  "taxi_schema": str(load_dataset_config("taxi").schema_path)}))
"""


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 300):
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done


def _sdist(tmp: Path) -> Path:
    """An sdist of a copy of the checkout (as a fresh clone has it), built outside the repository."""
    source = tmp / "source"
    shutil.copytree(PROJECT_ROOT, source, ignore=NOT_IN_A_CLONE)
    _run([sys.executable, "setup.py", "-q", "sdist", "--dist-dir", str(tmp / "sdist")], cwd=source)
    (sdist,) = (tmp / "sdist").glob("torchtfx-*.tar.gz")
    return sdist


def _fresh_venv(tmp: Path) -> tuple[Path, Path]:
    """A new venv (its python and site-packages) whose path ends with the test environment's stack."""
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp)
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp)
    site = Path(purelib.stdout.strip())
    assert site.is_relative_to(venv), site
    return python, site


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """sdist -> wheel -> a non-editable install into a fresh venv; returns (venv python, its site-packages)."""
    tmp = tmp_path_factory.mktemp("install")
    sdist = _sdist(tmp)
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    assert {"setup.py", "MANIFEST.in", "schema/taxi/schema.pbtxt", "data/datasets/taxi.yaml"} <= names, names
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(tmp / "wheel"),
            str(sdist),
        ],
        cwd=tmp,
    )
    (wheel,) = (tmp / "wheel").glob("torchtfx-*.whl")
    members = set(zipfile.ZipFile(wheel).namelist())
    assert set(SHIPPED) <= members, sorted(members)
    python, site = _fresh_venv(tmp)
    # The test environment's pip, run under the fresh interpreter (which has no pip, and no stack yet: pip sees no
    # other torchtfx), installs the wheel into the fresh venv.
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        cwd=tmp,
    )
    (site / "zz_pinned_stack.pth").write_text(f"{STACK}\n")
    return python, site


def _clean_env(venv_bin: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, "PATH": f"{venv_bin}{os.pathsep}{env.get('PATH', '')}", "VIRTUAL_ENV": str(venv_bin.parent)}


def test_the_installed_package_reads_its_own_shipped_files(installed, tmp_path):
    python, site = installed
    probe = _run([str(python), "-c", PROBE], cwd=tmp_path, env=_clean_env(python.parent))
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    assert found["checkout"] is None
    for key in ("cli", "schemas", "datasets", "taxi_schema"):
        assert Path(found[key]).is_relative_to(site), (key, found[key])
    assert Path(found["taxi_schema"]) == site / "torchtfx" / "schema" / "taxi" / "schema.pbtxt"


def test_torchtfx_run_from_an_empty_folder_trains_and_pushes_on_the_shipped_taxi_data(installed, tmp_path):
    python, site = installed
    work = tmp_path / "empty"
    work.mkdir()
    run = [
        str(python.parent / "torchtfx"),
        "run",
        "--epochs",
        "2",
        "--beam-mode",
        "multi_processing",
        "--beam-workers",
        "2",
    ]
    done = _run(run, cwd=work, env=_clean_env(python.parent), timeout=1500)
    root = work / "runs" / "local"
    summary = helpers.metadata(root)
    assert {s.node for s in summary.stages} == ALL_NODES
    assert all(s.state == "COMPLETE" for s in summary.stages), summary.stages
    assert summary.blessed is True, done.stdout[-3000:]
    assert (root / "serving" / "taxi" / "1" / "saved_model.pb").is_file()
    assert (root / "mlflow" / "mlflow.db").is_file()
    with contextlib.closing(sqlite3.connect(root / "metadata.sqlite")) as db:
        properties = db.execute(
            "SELECT name, string_value FROM ExecutionProperty WHERE name IN ('schema_file', 'code_version')"
        ).fetchall()
    # ImportSchemaGen read the installed schema; the Promoter recorded the installed version (no git checkout).
    assert set(properties) == {
        ("schema_file", str(site / "torchtfx" / "schema" / "taxi" / "schema.pbtxt")),
        ("code_version", "torchtfx==0.1.0"),
    }
    # Beam's workers were handed a wheel of the installed files (the DirectRunner's run in this environment).
    (wheel,) = (root / "beam_package").glob("torchtfx-*-py3-none-any.whl")
    members = set(zipfile.ZipFile(wheel).namelist())
    assert set(SHIPPED) <= members and "torchtfx/pipeline/cli/main.py" in members
    assert not any("__pycache__" in m for m in members)
    assert sorted(p.name for p in work.iterdir()) == ["runs"]  # nothing written outside the pipeline root
