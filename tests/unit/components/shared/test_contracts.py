"""The contracts shared across components agree with what TFX itself reads and writes, and the pipeline's
nodes carry exactly the ids the contracts name."""

from __future__ import annotations

import importlib

from tfx.components.pusher import executor as pusher_executor
from tfx.utils import path_utils

from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.handoff.constants import WORKER_MODULE


def test_model_layout_matches_tfx_path_utils(tmp_path):
    assert path_utils.serving_model_dir(str(tmp_path)) == str(tmp_path / contracts.SERVING_MODEL_SUBDIR)
    assert contracts.onnx_path(tmp_path) == tmp_path / "export" / "model.onnx"
    assert contracts.state_dict_path(tmp_path).parent == contracts.layout_path(tmp_path).parent


def test_pushed_model_properties_are_tfx_pushers():
    """The Promoter marks its PushedModel through TFX's Pusher executor; the run summary reads these names."""
    assert contracts.PUSHED_PROPERTY == pusher_executor._PUSHED_KEY
    assert contracts.PUSHED_DESTINATION_PROPERTY == pusher_executor._PUSHED_DESTINATION_KEY
    assert contracts.PUSHED_VERSION_PROPERTY == pusher_executor._PUSHED_VERSION_KEY


def test_pipeline_node_ids_are_the_contracts(taxi_pipeline):
    ids = {c.id for c in taxi_pipeline.components}
    named = {v for k, v in vars(contracts).items() if k.endswith("_ID") and isinstance(v, str)}
    assert ids == named
    assert set(contracts.MLFLOW_STEP_IDS) <= ids


def test_worker_module_is_the_ddp_entry_point():
    module = importlib.import_module(WORKER_MODULE)
    assert callable(module.main)
