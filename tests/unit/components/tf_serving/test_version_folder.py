"""A serving version's folder read back against its registered fingerprint (the reader the Promoter and
``torchtfx predict`` share): the registered bytes pass, changed or missing bytes are refused with the fix, and a
version registered before fingerprints is served with a warning."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from torchtfx.components.tf_serving import fingerprint
from torchtfx.components.tf_serving.errors import ServingConfigError
from torchtfx.components.tf_serving.version_folder import FolderChangedError, check_registered_bytes


def _served(serving_dir: Path, version: int) -> str:
    folder = serving_dir / str(version)
    (folder / "variables").mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(b"\x08\x01graph")
    (folder / "variables" / "variables.index").write_bytes(b"index")
    return fingerprint.saved_model_fingerprint(folder)


def test_the_registered_bytes_pass(tmp_path):
    recorded = _served(tmp_path, 3)
    check_registered_bytes(tmp_path, "3", recorded, "5", "taxi")


@pytest.mark.parametrize("change", ["edited", "missing"])
def test_changed_or_missing_bytes_are_refused_naming_folder_version_and_fix(tmp_path, change):
    recorded = _served(tmp_path, 3)
    if change == "edited":
        (tmp_path / "3" / "variables" / "variables.index").write_bytes(b"other")
    else:
        (tmp_path / "3" / "saved_model.pb").unlink()
    with pytest.raises(FolderChangedError) as raised:
        check_registered_bytes(tmp_path, "3", recorded, "5", "taxi")
    message = str(raised.value)
    assert message.startswith(f"{tmp_path / '3'} does not hold registry version 5 of taxi (on disk: ")
    assert ("no SavedModel" in message) == (change == "missing")
    assert "`torchtfx promote --version N --reason ...`" in message
    assert isinstance(raised.value, ServingConfigError)  # the CLI's user errors: the message, no traceback


def test_a_version_registered_before_fingerprints_is_served_with_a_warning(tmp_path, caplog):
    _served(tmp_path, 2)
    with caplog.at_level(logging.WARNING):
        check_registered_bytes(tmp_path, "2", None, "4", "taxi")
    assert "Registry version 4 records no fingerprint" in caplog.text
