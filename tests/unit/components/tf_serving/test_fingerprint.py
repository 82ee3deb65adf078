"""The model fingerprint: a content digest of the served SavedModel folder, equal for any byte copy of it (a
pushed serving version, a retrain that reproduced the same bytes) and different for any changed, added, removed
or renamed file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from torchtfx.components.tf_serving import fingerprint, layout


def _model(path: Path) -> Path:
    """A SavedModel's shape (saved_model.pb, variables/, assets/, assets.extra/) with known bytes."""
    (path / "variables").mkdir(parents=True)
    (path / "assets").mkdir()
    (path / "assets.extra").mkdir()
    (path / "saved_model.pb").write_bytes(b"\x08\x01graph")
    (path / "variables" / "variables.index").write_bytes(b"index")
    (path / "variables" / "variables.data-00000-of-00001").write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    (path / "assets" / "company").write_text("Flash Cab\nCity Service\n")
    (path / "assets.extra" / "tf_serving_warmup_requests").write_bytes(b"requests")
    return path


def test_a_copy_anywhere_has_the_same_fingerprint_and_so_does_the_pushed_serving_version(tmp_path):
    original = _model(tmp_path / "candidate" / "Format-Serving")
    copy = shutil.copytree(original, tmp_path / "retrained" / "Format-Serving")
    pushed = layout.push_version(original, tmp_path / "serving", 7)
    value = fingerprint.saved_model_fingerprint(original)
    assert value.startswith("sha256-tree-v1:") and len(value.split(":")[1]) == 64
    assert fingerprint.saved_model_fingerprint(Path(copy)) == value
    assert fingerprint.saved_model_fingerprint(pushed) == value
    assert fingerprint.listing(pushed) == fingerprint.listing(original)
    (copy / "assets" / "empty_folder").mkdir()  # TF Serving ignores empty folders; so does the fingerprint
    assert fingerprint.saved_model_fingerprint(Path(copy)) == value


CHANGES = {
    "one weight byte": lambda m: m.joinpath("variables", "variables.data-00000-of-00001").write_bytes(
        bytes(range(256)) * 4095 + bytes(range(255)) + b"\x00"
    ),
    "a vocabulary entry": lambda m: m.joinpath("assets", "company").write_text("Flash Cab\nCity Servic3\n"),
    "the warmup requests": lambda m: m.joinpath("assets.extra", "tf_serving_warmup_requests").write_bytes(b"other"),
    "an added file": lambda m: m.joinpath("assets", "payment_type").write_text("Cash\n"),
    "a removed file": lambda m: m.joinpath("assets.extra", "tf_serving_warmup_requests").unlink(),
    "a renamed file": lambda m: m.joinpath("assets", "company").rename(m / "assets" / "companies"),
    "a file moved to another folder": lambda m: m.joinpath("assets", "company").rename(m / "assets.extra" / "company"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_any_change_of_the_served_bytes_changes_the_fingerprint(tmp_path, change):
    model = _model(tmp_path / "model")
    before = fingerprint.saved_model_fingerprint(model)
    CHANGES[change](model)
    assert fingerprint.saved_model_fingerprint(model) != before


def test_a_folder_without_a_saved_model_has_no_fingerprint(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"holds no saved_model\.pb; it has no model fingerprint"):
        fingerprint.saved_model_fingerprint(tmp_path)


def test_the_listing_names_each_file_with_its_size_without_reading_it(tmp_path):
    model = _model(tmp_path / "model")
    listed = dict(fingerprint.listing(model))
    assert listed["variables/variables.data-00000-of-00001"] == 1 << 20
    assert listed["saved_model.pb"] == 7 and len(listed) == 5
