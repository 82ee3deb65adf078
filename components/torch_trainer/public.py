"""What the layer above (pipeline/) uses of the TorchTrainer: the component, its hyperparameters and PyTorchJob
settings, the model factory the model check builds with, and the check that a required GPU is usable.

Each name is imported from its module when first used (components/shared/public_names.py: the CLI starts
without TFX or torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchtfx.components.shared.public_names import lazy_names

if TYPE_CHECKING:  # the names' types, for mypy
    from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import (
        PyTorchJobSettings,
        SecretEnv,
        Toleration,
        VolumeMount,
        is_secret_name,
    )
    from torchtfx.components.torch_trainer.component import TorchTrainer
    from torchtfx.components.torch_trainer.constants import DEFAULT_PARITY_TOLERANCE, LOG_ROOT_KEY
    from torchtfx.components.torch_trainer.handoff.devices import CUDA, CudaUnavailableError, require_cuda
    from torchtfx.components.torch_trainer.handoff.hparams import CPU_WORKERS, TrainerHParams
    from torchtfx.components.torch_trainer.modeling.factory import build_model, embed_source, provisional_spec
    from torchtfx.components.torch_trainer.modeling.spec import SequenceInput

__all__ = [
    "CPU_WORKERS",
    "CUDA",
    "DEFAULT_PARITY_TOLERANCE",
    "LOG_ROOT_KEY",
    "CudaUnavailableError",
    "PyTorchJobSettings",
    "SecretEnv",
    "SequenceInput",
    "Toleration",
    "TorchTrainer",
    "TrainerHParams",
    "VolumeMount",
    "build_model",
    "embed_source",
    "is_secret_name",
    "provisional_spec",
    "require_cuda",
]
__getattr__ = lazy_names(
    __name__,
    {
        "PyTorchJobSettings": "torchtfx.components.torch_trainer.cluster.pytorchjob_settings",
        "SecretEnv": "torchtfx.components.torch_trainer.cluster.pytorchjob_settings",
        "Toleration": "torchtfx.components.torch_trainer.cluster.pytorchjob_settings",
        "VolumeMount": "torchtfx.components.torch_trainer.cluster.pytorchjob_settings",
        "is_secret_name": "torchtfx.components.torch_trainer.cluster.pytorchjob_settings",
        "TorchTrainer": "torchtfx.components.torch_trainer.component",
        "DEFAULT_PARITY_TOLERANCE": "torchtfx.components.torch_trainer.constants",
        "LOG_ROOT_KEY": "torchtfx.components.torch_trainer.constants",
        "CPU_WORKERS": "torchtfx.components.torch_trainer.handoff.hparams",
        "CUDA": "torchtfx.components.torch_trainer.handoff.devices",
        "CudaUnavailableError": "torchtfx.components.torch_trainer.handoff.devices",
        "require_cuda": "torchtfx.components.torch_trainer.handoff.devices",
        "TrainerHParams": "torchtfx.components.torch_trainer.handoff.hparams",
        "build_model": "torchtfx.components.torch_trainer.modeling.factory",
        "embed_source": "torchtfx.components.torch_trainer.modeling.factory",
        "provisional_spec": "torchtfx.components.torch_trainer.modeling.factory",
        "SequenceInput": "torchtfx.components.torch_trainer.modeling.spec",
    },
)
