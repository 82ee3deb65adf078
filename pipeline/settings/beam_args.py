"""Beam pipeline args for TFX's Beam components, and the package through which Beam workers get torchtfx."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
import zipfile
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from torchtfx.data.config.strict import StrictConfig, one_of, whole_number
from torchtfx.data.resources import source_checkout

logger = logging.getLogger(__name__)

BEAM_MODE_AUTO = "auto"
BEAM_MODES = (BEAM_MODE_AUTO, "in_memory", "multi_processing")
# The DirectRunner's worker processes run on this one machine: no node has more than 1,024 cores (100,000 was
# accepted, issue #41).
MAX_BEAM_WORKERS = 1024
if TYPE_CHECKING:
    BeamWorkers = int
else:
    BeamWorkers = whole_number(1, MAX_BEAM_WORKERS)
# Inputs below this run every Beam stage in the pipeline process (--direct_running_mode=in_memory).
SMALL_INPUT_BYTES = 32 * 2**20

# The flags through which Beam workers get their Python code. TFX checks for the same list
# (tfx.utils.dependency_utils.make_beam_dependency_flags).
DEPENDENCY_FLAGS = (
    "--extra_package",
    "--extra_packages",
    "--setup_file",
    "--requirements_file",
    "--sdk_container_image",
    "--worker_harness_container_image",
)
DISTRIBUTION = "torchtfx"
WORKER_PACKAGE_DIR = "beam_package"  # under a local run's pipeline root: the wheel Beam workers get
# What pip writes into a dist-info at install time (RECORD and WHEEL are written anew for the wheel).
_INSTALL_TIME_FILES = ("RECORD", "WHEEL", "INSTALLER", "REQUESTED", "direct_url.json")
_WHEEL_FILE = f"Wheel-Version: 1.0\nGenerator: {__name__}\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed: the same installed files give the same wheel, byte for byte


class BeamSettings(StrictConfig):
    """A local run's DirectRunner settings (``beam.mode``, ``beam.workers``), checked with the other settings
    when they are resolved (pipeline/settings/resolve.py), before anything runs."""

    mode: str = BEAM_MODE_AUTO
    workers: BeamWorkers = 2

    _known_mode = one_of("mode", BEAM_MODES, "beam mode")


def _site_root(module_file: Path) -> Path:
    """The folder that holds the ``torchtfx`` namespace this module was imported from (site-packages, or a
    checkout's import root): one level up per dot in the module's name, wherever the module moves (a move from
    pipeline/ to pipeline/settings/ once made an installed run refuse its own distribution)."""
    return module_file.parents[__name__.count(".")]


class WorkerPackageError(RuntimeError):
    """The installed torchtfx cannot be packaged for Beam workers."""


def with_dependency(beam_args: list[str], dependency_flag: str) -> list[str]:
    """``beam_args`` plus ``dependency_flag`` (``--setup_file=...`` or ``--sdk_container_image=...``)
    unless the user's args already say how workers get their code.

    Without one, every TFX Beam executor copies the whole TFX install into a fresh temp directory and
    builds an sdist of it (about 50 MB and several seconds per step), which is never removed: a local run
    left 300 MB behind in /tmp, and a test session filled the disk. DirectRunner ignores the flag; a
    remote runner (Dataflow, Flink) gets the project, whose requirements include TFX.
    """
    names = {arg.split("=", 1)[0] for arg in beam_args}
    if names & set(DEPENDENCY_FLAGS):
        return list(beam_args)
    if dependency_flag.split("=", 1)[0] not in DEPENDENCY_FLAGS:
        raise ValueError(f"{dependency_flag!r} is not a Beam dependency flag ({', '.join(DEPENDENCY_FLAGS)})")
    return [*beam_args, dependency_flag]


def direct_runner_args(beam_mode: str, beam_workers: int, input_bytes: int) -> list[str]:
    """The DirectRunner's mode and worker count for ``input_bytes`` of input: ``auto`` runs every stage in the
    calling process below SMALL_INPUT_BYTES (each multi_processing stage starts worker processes that import
    TF/TFX and talk to the runner over gRPC: on the 15k-row taxi data that costs more than the work), else worker
    processes."""
    if beam_mode not in BEAM_MODES:
        raise ValueError(f"beam mode {beam_mode!r} is not one of {', '.join(BEAM_MODES)}")
    mode = beam_mode
    if mode == BEAM_MODE_AUTO:
        mode = "in_memory" if input_bytes < SMALL_INPUT_BYTES else "multi_processing"
    workers = 1 if mode == "in_memory" else beam_workers  # in_memory runs one worker; Beam warns otherwise
    return [f"--direct_running_mode={mode}", f"--direct_num_workers={workers}"]


def worker_dependency_flag(build_dir: Path | None = None) -> str:
    """How Beam workers get torchtfx: from a source checkout, its ``setup.py`` (``--setup_file``: a remote runner
    builds the project, schemas and dataset YAMLs included, as package data); from an installed distribution,
    which has no ``setup.py``, a wheel of the installed files written under ``build_dir`` (``--extra_package``;
    default: the user's cache folder, :func:`package_cache_dir`).
    """
    checkout = source_checkout()
    if checkout is not None:
        return f"--setup_file={checkout / 'setup.py'}"
    return f"--extra_package={repack_wheel(running_distribution(), build_dir or package_cache_dir())}"


def package_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/torchtfx/beam_package`` (``~/.cache/...``): one wheel per version, rewritten on use."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / DISTRIBUTION / WORKER_PACKAGE_DIR


def running_distribution() -> metadata.Distribution:
    """The installed torchtfx distribution this code was loaded from (not another one further down sys.path)."""
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise WorkerPackageError(
            f"torchtfx runs from {_site_root(Path(__file__).resolve())} but no {DISTRIBUTION} "
            "distribution is installed; install it with pip"
        ) from None
    here = Path(__file__).resolve()
    recorded = Path(str(dist.locate_file(here.relative_to(_site_root(here)).as_posix()))).resolve()
    if recorded != here:
        raise WorkerPackageError(
            f"the {DISTRIBUTION} distribution found first on sys.path ({dist.locate_file('')}) is not the one running "
            f"({_site_root(here)}); uninstall one of them, or run from the environment that holds the other"
        )
    return dist


def _wheel_name(dist: metadata.Distribution) -> str:
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"]).lower()
    return f"{name}-{dist.version}-py3-none-any.whl"


def _ships(relative: str, info_dir: str) -> bool:
    """Whether an installed file goes into the wheel: the packages' files and the project's metadata, not the
    console scripts (outside site-packages: pip writes them anew), bytecode, or what pip wrote at install time."""
    parts = relative.split("/")
    if parts[0] == ".." or "__pycache__" in parts or relative.endswith(".pyc"):
        return False
    return not (parts[0] == info_dir and parts[-1] in _INSTALL_TIME_FILES)


def _add(wheel: zipfile.ZipFile, name: str, data: bytes) -> str:
    """Write one member, returning its RECORD line."""
    member = zipfile.ZipInfo(name, _ZIP_TIME)
    member.external_attr = 0o644 << 16
    member.compress_type = zipfile.ZIP_DEFLATED
    wheel.writestr(member, data)
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _payload(dist: metadata.Distribution) -> tuple[str, list[str]]:
    """The dist-info folder's name and the files of ``dist`` that go into its wheel."""
    files = [f.as_posix() for f in dist.files or ()]
    info_dir = next((f.split("/")[0] for f in files if f.split("/")[0].endswith(".dist-info")), None)
    if info_dir is None:
        raise WorkerPackageError(
            f"{dist.metadata['Name']} {dist.version} at {dist.locate_file('')} has no RECORD of its files, so it "
            "cannot be packaged for Beam workers; reinstall it with pip"
        )
    return info_dir, sorted(f for f in files if _ships(f, info_dir))


def _fill(wheel: zipfile.ZipFile, dist: metadata.Distribution, info_dir: str, payload: list[str]) -> None:
    record = []
    for name in payload:
        try:
            data = Path(str(dist.locate_file(name))).read_bytes()
        except OSError as err:
            raise WorkerPackageError(
                f"{name}, a file of the installed {dist.metadata['Name']}, cannot be read "
                f"({err.strerror or err}); reinstall it with pip"
            ) from None
        record.append(_add(wheel, name, data))
    record.append(_add(wheel, f"{info_dir}/WHEEL", _WHEEL_FILE.encode()))
    record.append(f"{info_dir}/RECORD,,")
    wheel.writestr(zipfile.ZipInfo(f"{info_dir}/RECORD", _ZIP_TIME), "\n".join(record) + "\n")


def repack_wheel(dist: metadata.Distribution, out_dir: Path) -> Path:
    """A wheel of the installed ``dist``, from the files its RECORD lists: what Beam workers install through
    ``--extra_package``. Rewritten on each call (under the same name, atomically): it is the code now installed."""
    info_dir, payload = _payload(dist)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / _wheel_name(dist)
    partial = target.with_name(target.name + ".partial")
    try:
        with zipfile.ZipFile(partial, "w") as wheel:
            _fill(wheel, dist, info_dir, payload)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    logger.info("Beam workers get %s (%d files of the installed %s)", target, len(payload), dist.metadata["Name"])
    return target
