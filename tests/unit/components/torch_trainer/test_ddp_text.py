"""DDP with token-sequence inputs: two torch.distributed processes train the zoo's mixture of experts (its
load-balancing loss and routing included) on texts whose label is a token's presence, then rank 0 exports the
graph with batch and length dynamic."""

from __future__ import annotations

import onnx

from tests import helpers
from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.cluster.launch import launch
from torchtfx.components.torch_trainer.handoff.job import TrainResult


def test_two_process_ddp_trains_a_routed_text_model_and_exports_it_with_both_axes_dynamic(tmp_path):
    job = helpers.text_train_job(tmp_path, "text_moe", epochs=4)
    launch(job, tmp_path / "job.json", tmp_path / "train.log")
    result = TrainResult.load(tmp_path / "run" / contracts.RESULT_FILE)
    assert result.world_size == 2 and result.eval_auc > 0.8, result
    assert result.onnx_max_abs_diff < 1e-5
    graph = onnx.load(str(tmp_path / "model" / contracts.ONNX_FILE))
    assert [i.name for i in graph.graph.input] == ["dense", "categorical", "text_xf"]
    assert [d.dim_param for d in graph.graph.input[2].type.tensor_type.shape.dim] == ["batch", "text_xf_length"]
    assert any(n.op_type == "TopK" for n in graph.graph.node)
