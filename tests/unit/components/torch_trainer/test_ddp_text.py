"""DDP with token-sequence inputs: two torch.distributed processes train the zoo's mixture of experts (its
load-balancing loss and routing included) on texts whose label is a token's presence, then rank 0 exports the
graph with batch and length dynamic."""

from __future__ import annotations

import numpy as np
import onnx

from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.cluster.launch import launch
from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.handoff.job import TrainJob, TrainResult
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout
from torchtfx.data.config.model import ModelConfig

VOCAB, MAX_LENGTH, SIGNAL = 40, 12, 7


def _texts(rows: int, seed: int) -> ArraySplit:
    """Texts of 0 to MAX_LENGTH tokens; the label is whether token SIGNAL occurs."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, MAX_LENGTH + 1, rows)
    ids = rng.integers(2, VOCAB, (rows, MAX_LENGTH))
    ids[np.arange(MAX_LENGTH)[None, :] >= lengths[:, None]] = 0
    label = (ids == SIGNAL).any(axis=1).astype(np.float32)
    categorical = rng.integers(0, 3, (rows, 1))
    return ArraySplit(np.zeros((rows, 0), np.float32), categorical, label, (ids,), ("text_xf",))


def test_two_process_ddp_trains_a_routed_text_model_and_exports_it_with_both_axes_dynamic(tmp_path):
    _texts(1024, 0).save(tmp_path / "data" / "train")
    _texts(256, 1).save(tmp_path / "data" / "eval")
    layout = FeatureLayout(
        dense=(),
        embedded=("source_xf",),
        cardinalities=(3,),
        label="positive_xf",
        sequences=("text_xf",),
        sequence_vocab_sizes=(VOCAB,),
        sequence_max_lengths=(MAX_LENGTH,),
    )
    model = ModelConfig(factory="text_moe", hparams={"d_model": 16, "n_heads": 2, "d_ffn": 32, "n_layers": 1})
    hp = TrainerHParams(epochs=4, batch_size=64, num_workers=2, device="cpu", model=model)
    job = TrainJob(
        data_dir=str(tmp_path / "data"),
        model_dir=str(tmp_path / "model"),
        run_dir=str(tmp_path / "run"),
        layout=layout,
        hparams=hp,
        mlflow_tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        mlflow_experiment="test-ddp-text",
        mlflow_run_name="ddp-text",
        mlflow_tags={},
    )
    launch(job, tmp_path / "job.json", tmp_path / "train.log")
    result = TrainResult.load(tmp_path / "run" / contracts.RESULT_FILE)
    assert result.world_size == 2 and result.eval_auc > 0.8, result
    assert result.onnx_max_abs_diff < 1e-5
    graph = onnx.load(str(tmp_path / "model" / contracts.ONNX_FILE))
    assert [i.name for i in graph.graph.input] == ["dense", "categorical", "text_xf"]
    assert [d.dim_param for d in graph.graph.input[2].type.tensor_type.shape.dim] == ["batch", "text_xf_length"]
    assert any(n.op_type == "TopK" for n in graph.graph.node)
