"""A serving version's folder read back against what the registry recorded for it: the folder must hold the bytes
(``fingerprint.py``) registered under that version before a label is put on it (the Promoter) or it scores
(``torchtfx predict``). The caller reads the registry; this module reads only the serving directory."""

from __future__ import annotations

import logging
from pathlib import Path

from torchtfx.components.tf_serving import fingerprint
from torchtfx.components.tf_serving.errors import ServingConfigError

logger = logging.getLogger(__name__)


class FolderChangedError(ServingConfigError):
    """A serving version's folder does not hold the bytes registered under it."""


def _short(value: str) -> str:
    scheme, _, digest = value.partition(":")
    return f"{scheme}:{digest[:12]}"


def check_registered_bytes(
    serving_dir: Path, serving_version: str, recorded: str | None, registry_version: str, model_name: str
) -> None:
    """Refuse a serving folder that does not hold the fingerprint ``recorded`` for ``registry_version`` of
    ``model_name``; a version registered before fingerprints (``recorded`` None) is served unverified."""
    folder = serving_dir / serving_version
    try:
        actual = fingerprint.saved_model_fingerprint(folder)
    except FileNotFoundError:
        actual = None
    if recorded is None and actual is not None:
        logger.warning(
            "Registry version %s records no fingerprint (promoted before fingerprints): %s is served unverified",
            registry_version,
            folder,
        )
        return
    if actual != recorded:
        on_disk = _short(actual) if actual else "no SavedModel"
        raise FolderChangedError(
            f"{folder} does not hold registry version {registry_version} of {model_name} "
            f"(on disk: {on_disk}; registered: {_short(recorded or '?:none')}): it was changed on disk or written "
            "by another registry. Nothing was changed. Restore the folder from the registry version's artifacts, "
            "or make another version the champion (`torchtfx promote --version N --reason ...`)"
        )
