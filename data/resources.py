"""The files torchtfx ships as package data, found through :mod:`importlib.resources`: the curated schemas
(``schema/`` of the repository, installed as ``torchtfx.schema``) and the dataset YAMLs (``data/datasets/``,
part of ``torchtfx.data``). The same calls find them in a source checkout (an editable install maps the
packages onto the repository's folders) and in site-packages (``pip install .``), whatever the working folder.

TFX reads a schema by its path, so a shipped file must be a file on disk: a zipped install is refused by name.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

SCHEMA_PACKAGE = "torchtfx.schema"
SCHEMA_FOLDER = "schema"  # what a relative ``schema:`` path in a dataset YAML starts with
SCHEMA_FILE = "schema.pbtxt"
DATASETS_PACKAGE = "torchtfx.data"
DATASETS_FOLDER = "datasets"


class PackagedFileError(RuntimeError):
    """A file torchtfx ships cannot be found where the installed package should hold it."""


def package_folder(package: str) -> Path:
    """The folder of an installed torchtfx package, as a path on disk."""
    folder = resources.files(package)
    if not isinstance(folder, Path):
        raise PackagedFileError(
            f"{package} is not installed as files on disk ({folder!r}), and TFX reads its files by path; "
            "install torchtfx with pip into a virtual environment (not as a zip archive)"
        )
    return folder


def schemas_dir() -> Path:
    """The folder of the curated schemas: ``<folder>/<dataset>/schema.pbtxt``."""
    return package_folder(SCHEMA_PACKAGE)


def datasets_dir() -> Path:
    """The folder of the shipped dataset YAMLs: ``<folder>/<dataset>.yaml``."""
    return package_folder(DATASETS_PACKAGE) / DATASETS_FOLDER


def shipped_schemas() -> list[str]:
    """The datasets with a shipped schema, sorted."""
    return sorted(p.parent.name for p in schemas_dir().glob(f"*/{SCHEMA_FILE}"))


def shipped_schema(relative: Path | str, key: str = "schema") -> Path:
    """The shipped file that ``schema/<dataset>/schema.pbtxt`` (relative, as dataset YAMLs write it) names.

    ``key`` names the setting in the errors: a path that climbs out of ``schema/`` with '..', or one that does
    not start with ``schema/``, is refused with what to write instead.
    """
    normalized = Path(os.path.normpath(relative))
    parts = normalized.parts
    if normalized.is_absolute() or parts[:1] == ("..",):
        raise ValueError(
            f"'{key}' {str(relative)!r} points outside the shipped schemas; a relative path names one of them "
            f"({SCHEMA_FOLDER}/<dataset>/{SCHEMA_FILE}), an absolute path a schema of your own"
        )
    if len(parts) < 2 or parts[0] != SCHEMA_FOLDER:
        raise ValueError(
            f"'{key}' {str(relative)!r}: a relative path names a shipped schema, {SCHEMA_FOLDER}/<dataset>/"
            f"{SCHEMA_FILE} (shipped: {', '.join(shipped_schemas())}); give an absolute path for a schema of your own"
        )
    return schemas_dir().joinpath(*parts[1:])


def source_checkout() -> Path | None:
    """The repository root when this code runs from a source checkout (an editable install), else None.

    In a checkout this file is ``<root>/data/resources.py`` next to ``<root>/setup.py``; installed, it is
    ``site-packages/torchtfx/data/resources.py`` and no ``setup.py`` is beside ``torchtfx/``.
    """
    root = Path(__file__).resolve().parents[1]
    return root if (root / "setup.py").is_file() and (root / SCHEMA_FOLDER).is_dir() else None
