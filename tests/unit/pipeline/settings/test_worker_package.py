"""How Beam workers get torchtfx: the checkout's setup.py, or a wheel repacked from the installed distribution."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from tests.paths import PROJECT_ROOT
from torchtfx.pipeline.settings.beam_args import WorkerPackageError, repack_wheel, worker_dependency_flag

INFO = "torchtfx-0.1.0.dist-info"
INSTALLED = {
    "torchtfx/pipeline/__init__.py": b"",
    "torchtfx/pipeline/tool.py": b"VALUE = 42\n",
    "torchtfx/schema/taxi/schema.pbtxt": b'feature { name: "fare" type: FLOAT }\n',
    "torchtfx/data/datasets/taxi.yaml": b"name: taxi\n",
    "torchtfx/pipeline/__pycache__/tool.cpython-310.pyc": b"\x00bytecode",
    f"{INFO}/METADATA": b"Metadata-Version: 2.1\nName: torchtfx\nVersion: 0.1.0\n",
    f"{INFO}/entry_points.txt": b"[console_scripts]\ntorchtfx = torchtfx.pipeline.tool:main\n",
    f"{INFO}/top_level.txt": b"torchtfx\n",
    f"{INFO}/INSTALLER": b"pip\n",
    f"{INFO}/REQUESTED": b"",
    f"{INFO}/direct_url.json": b'{"url": "file:///somewhere/torchtfx-0.1.0.whl", "archive_info": {}}',
    f"{INFO}/WHEEL": b"Wheel-Version: 1.0\nGenerator: bdist_wheel\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
SHIPS = {
    "torchtfx/pipeline/__init__.py",
    "torchtfx/pipeline/tool.py",
    "torchtfx/schema/taxi/schema.pbtxt",
    "torchtfx/data/datasets/taxi.yaml",
    f"{INFO}/METADATA",
    f"{INFO}/entry_points.txt",
    f"{INFO}/top_level.txt",
}


def _installed(site: Path, *, record: bool = True, missing: str | None = None) -> metadata.Distribution:
    """A distribution installed as pip leaves it: its files, and a RECORD that lists them and the console script
    outside site-packages."""
    for name, data in INSTALLED.items():
        if name != missing:
            (site / name).parent.mkdir(parents=True, exist_ok=True)
            (site / name).write_bytes(data)
    if record:
        lines = [f"{name},," for name in INSTALLED] + ["../../../bin/torchtfx,,", f"{INFO}/RECORD,,"]
        (site / INFO / "RECORD").write_text("\n".join(lines) + "\n")
    return metadata.PathDistribution(site / INFO)


def test_from_a_checkout_workers_get_the_setup_file_and_nothing_is_built(tmp_path):
    assert worker_dependency_flag(tmp_path / "beam") == f"--setup_file={PROJECT_ROOT / 'setup.py'}"
    assert not (tmp_path / "beam").exists()


def test_the_wheel_holds_the_installed_files_with_a_valid_record(tmp_path):
    wheel = repack_wheel(_installed(tmp_path / "site"), tmp_path / "out")
    assert wheel == tmp_path / "out" / "torchtfx-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert names == SHIPS | {f"{INFO}/WHEEL", f"{INFO}/RECORD"}
        assert "Root-Is-Purelib: true" in archive.read(f"{INFO}/WHEEL").decode()
        record = [line.split(",") for line in archive.read(f"{INFO}/RECORD").decode().splitlines()]
        assert {row[0] for row in record} == names
        for name, digest, size in record:
            if name != f"{INFO}/RECORD":
                data = archive.read(name)
                expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert (digest, int(size)) == (f"sha256={expected}", len(data)), name
    assert not list((tmp_path / "out").glob("*.partial"))


def test_the_same_installed_files_give_the_same_wheel_byte_for_byte(tmp_path):
    dist = _installed(tmp_path / "site")
    first = repack_wheel(dist, tmp_path / "a").read_bytes()
    assert repack_wheel(dist, tmp_path / "b").read_bytes() == first


def test_pip_installs_the_wheel(tmp_path):
    """What a Beam worker does with --extra_package: pip accepts the wheel and installs the same files."""
    wheel = repack_wheel(_installed(tmp_path / "site"), tmp_path / "out")
    target = tmp_path / "target"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (target / "torchtfx" / "pipeline" / "tool.py").read_bytes() == INSTALLED["torchtfx/pipeline/tool.py"]
    assert (target / "torchtfx" / "schema" / "taxi" / "schema.pbtxt").is_file()


def test_a_distribution_without_a_record_is_refused_with_the_fix(tmp_path):
    with pytest.raises(WorkerPackageError, match=r"torchtfx 0\.1\.0 at .* has no RECORD of its files.*reinstall it"):
        repack_wheel(_installed(tmp_path / "site", record=False), tmp_path / "out")


def test_a_recorded_file_that_is_gone_is_named_and_no_partial_wheel_is_left(tmp_path):
    dist = _installed(tmp_path / "site", missing="torchtfx/pipeline/tool.py")
    with pytest.raises(
        WorkerPackageError,
        match=r"torchtfx/pipeline/tool\.py, a file of the installed torchtfx, "
        r"cannot be read .*reinstall it with pip",
    ):
        repack_wheel(dist, tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []
