"""The trained network back from its files: the factory rebuilds the module, the saved state dict fills it.
Shared by the Trainer's parity gate, the MLflow Model's PyTorch form and the benchmarks."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.modeling.factory import build_model
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout


def load_torch_model(export_dir: Path, layout: FeatureLayout, hparams: TrainerHParams) -> nn.Module:
    """The trained network, rebuilt by its factory and loaded with the saved weights (weights only)."""
    model = build_model(hparams.model, layout.model_spec())
    state = torch.load(export_dir / contracts.STATE_DICT_FILE, map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    return model.eval()
