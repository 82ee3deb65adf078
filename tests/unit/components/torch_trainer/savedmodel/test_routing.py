"""The FP16 drift gate on routing: how often a mixture of experts' top-k expert choice changes between the FP32
and float16 translations of its exported graph, counted per routed token and TopK node on the eval split, and
judged against ``serving.drift_limits.max_routing_flip_rate``."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tensorflow as tf
import torch
from torch import nn

from tests.unit.components.torch_trainer.served_models import export_and_serve
from torchtfx.components.converter.translator import OnnxGraphModule
from torchtfx.components.torch_trainer import flow
from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.modeling.spec import ModelSpec, SequenceInput
from torchtfx.components.torch_trainer.modeling.zoo import text_cnn, text_moe
from torchtfx.components.torch_trainer.savedmodel import routing
from torchtfx.components.torch_trainer.savedmodel.precision import (
    drift_figures,
    reduced_precision_network,
    routes,
    routing_drift,
)
from torchtfx.components.torch_trainer.savedmodel.routing import measure_routing
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import export_onnx
from torchtfx.data.config.serving_precision import DriftLimits, ServingConfig, ServingPrecisionError

MAX_LENGTH, VOCAB = 24, 2000
TEXT = SequenceInput("text_xf", VOCAB, MAX_LENGTH)
SPEC = ModelSpec(("a", "b"), ("source",), (5,), sequences=(TEXT,))
LIMITS = DriftLimits()
TINY_MOE = dict(d_model=16, n_layers=1, n_heads=2, d_ffn=16, head_hidden=8, dropout=0.0)


def _split(rows: int = 48, seed: int = 0) -> ArraySplit:
    """Rows of 0 to MAX_LENGTH Zipf-distributed tokens (some empty, one full), padded at the end."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, MAX_LENGTH + 1, rows)
    lengths[:3] = (0, 1, MAX_LENGTH)
    ids = 2 + (rng.zipf(1.3, (rows, MAX_LENGTH)) - 1) % (VOCAB - 2)
    ids[np.arange(MAX_LENGTH)[None, :] >= lengths[:, None]] = 0
    dense = rng.normal(size=(rows, 2)).astype(np.float32)
    return ArraySplit(dense, rng.integers(0, 5, (rows, 1)), np.zeros(rows, np.float32), (ids,), ("text_xf",))


def _exported(model: torch.nn.Module, split: ArraySplit, path) -> onnx.ModelProto:
    export_onnx(ExportHead(model.eval(), "binary"), split, path)
    return onnx.load(str(path))


def _probabilities(network: tf.Module, split: ArraySplit) -> np.ndarray:
    signature = [tf.TensorSpec([None, None], x.dtype) for x in split.model_inputs(slice(0, 1))]
    call = tf.function(lambda *x: network(*x)[0], input_signature=signature, autograph=False)
    return call(*split.model_inputs()).numpy()


def test_the_zoo_moe_makes_one_decision_per_routed_token_and_layer_in_length_sorted_batches(tmp_path, monkeypatch):
    torch.manual_seed(0)
    split = _split()
    graph = _exported(text_moe.build(SPEC), split, tmp_path / "moe.onnx")
    monkeypatch.setattr(routing, "eval_batch_size", lambda _: 8)  # several batches, each cut to its longest row
    report = measure_routing(graph, split)

    # Rows sorted by length, 8 a batch; each routes its [CLS] and every position up to its longest row (>= 1).
    lengths = np.sort(np.count_nonzero(split.sequences[0], axis=1))
    routed = sum(len(batch) * (1 + max(1, batch.max())) for batch in np.split(lengths, range(8, len(lengths), 8)))
    print(report)
    assert report.nodes == 2 and report.decisions == 2 * routed  # the zoo default: two MoE layers
    assert 0 <= report.changed <= report.decisions and report.rate == report.changed / report.decisions
    assert report.rate <= LIMITS.max_routing_flip_rate  # the untouched zoo MoE passes the default limit
    assert routes(tmp_path / "moe.onnx") and routing_drift(tmp_path / "moe.onnx", _saved(split, tmp_path)) is not None


def _saved(split: ArraySplit, root) -> str:
    split.save(root / "eval")
    return str(root / "eval")


def _near_tied(router: nn.Linear) -> None:
    """Sets a router's two rows float16-equal but float32-different: row 1 is row 0 moved by a quarter of
    float16's spacing, so float16 rounds both to the same weights, ties every token and picks expert 0 (the lower
    index), where float32 picks expert 1 for about half of them."""
    rng = np.random.default_rng(1)
    first = rng.normal(0, 0.5, router.weight.shape[1]).astype(np.float16)
    second = first.astype(np.float32) + np.spacing(first).astype(np.float32) * rng.choice([-0.25, 0.25], first.shape)
    assert np.array_equal(second.astype(np.float16), first) and not np.array_equal(second, first)
    with torch.no_grad():
        router.weight.copy_(torch.from_numpy(np.stack([first.astype(np.float32), second])))


def test_a_near_tied_router_flips_in_float16_and_the_drift_gate_refuses_it(tmp_path):
    torch.manual_seed(0)
    split = _split()
    model = text_moe.build(SPEC, experts=2, top_k=1, **TINY_MOE)
    (moe,) = [m for m in model.modules() if isinstance(m, text_moe.TopKMoE)]
    _near_tied(moe.router)
    chosen = []
    route = moe.route
    moe.route = lambda x, keep: chosen.append(route(x, keep)) or chosen[-1]
    graph = _exported(model, split, tmp_path / "moe.onnx")

    report = measure_routing(graph, split)

    chosen.clear()
    with torch.no_grad():
        model(*map(torch.from_numpy, split.model_inputs()))
    to_second = int(chosen[0][2][..., 1].sum())  # real tokens ([CLS] included) that FP32 sends to expert 1
    print(report, to_second)
    # FP16 sends all of them to expert 0 (a float32 near-tie closer than TF's and torch's rounding differences
    # may go either way: a 1% margin); padding ties in both precisions.
    assert report.nodes == 1 and to_second > 0.1 * report.decisions
    assert abs(report.changed - to_second) <= 0.01 * to_second
    full = _probabilities(OnnxGraphModule(graph), split)
    half = _probabilities(reduced_precision_network(tmp_path / "moe.onnx")[0], split)
    drift = drift_figures(full, half, "binary", LIMITS, "float16 network (CPU)", report)
    sentence = f"routing: {report.changed} of {report.decisions} top-k expert choices change ("
    assert not drift.passed and any(v.startswith(sentence) and v.endswith(", limit 1.00%)") for v in drift.violations)
    assert sentence in drift.summary() and drift.to_metrics()["fp16_routing_flip_rate"] == report.rate
    assert (drift.routing_decisions, drift.routing_flips) == (report.decisions, report.changed)
    lenient = drift_figures(full, full, "binary", LIMITS.replace(max_routing_flip_rate=1.0), "m", report)
    assert lenient.passed and sentence in lenient.summary()  # within a limit raised to 100%: still reported


class TabularMoE(nn.Module):
    """Each row's score from its top-1 of two experts (``torch.topk`` over a router's softmax), the experts nearly
    equal: a routing flip barely moves the probability, yet the row goes through another expert."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.router = nn.Linear(width, 2, bias=False)
        self.experts = nn.Linear(width, 2)
        with torch.no_grad():
            self.experts.weight[1] = self.experts.weight[0] + 1e-3
            self.experts.bias[1] = self.experts.bias[0]

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        _, chosen = torch.topk(torch.softmax(self.router(dense), dim=-1), 1, dim=-1)
        return torch.gather(self.experts(dense), 1, chosen).squeeze(1)


def test_the_trainer_refuses_a_variant_whose_routing_flips_though_its_probabilities_barely_move(tiny_taxi, tmp_path):
    torch.manual_seed(0)
    model = TabularMoE(len(tiny_taxi.layout.dense))
    _near_tied(model.router)
    export_and_serve(tiny_taxi, model, tmp_path / "export" / "model.onnx", tmp_path / "Format-Serving")
    tiny_taxi.arrays.save(tmp_path / "arrays" / "eval")
    request = flow.TrainRequest(
        dataset=tiny_taxi.cfg,
        hparams=TrainerHParams(serving=ServingConfig(precision="fp16")),
        split_uris={"eval": str(tiny_taxi.examples_dir)},
        transform_graph_uri="",
        model_uri=str(tmp_path),
        serving_dir=str(tmp_path / "Format-Serving"),
        run_uri=str(tmp_path / "run"),
        work_dir=str(tmp_path / "work"),
        mlflow_tracking_uri="",
        mlflow_experiment="",
        mlflow_run_name="",
        mlflow_tags={},
        parity_tolerance=1e-5,
    )

    outcome = flow.reduced_precision(
        request, tiny_taxi.tft_output, tiny_taxi.layout, tmp_path / "export", tmp_path / "arrays"
    )

    drift = outcome.drift
    print(outcome.reason)
    assert outcome.served == "fp32" and drift.routing_decisions == len(tiny_taxi.arrays)  # one per row
    assert drift.max_abs_diff <= LIMITS.max_abs_diff and drift.flips == 0  # the probabilities pass...
    assert drift.violations == (  # ...the routing does not
        f"routing: {drift.routing_flips} of {drift.routing_decisions} top-k expert choices change "
        f"({drift.routing_flip_rate:.2%}, limit 1.00%)",
    )
    assert drift.routing_flip_rate > 0.2 and outcome.reason.startswith("refused by the drift gate: routing: ")
    assert "fp16_routing_flip_rate" in drift.to_metrics() and '"routing_flips": ' in outcome.to_json()


def test_a_model_without_top_k_has_no_routing_figure(tmp_path):
    torch.manual_seed(0)
    split = _split()
    graph = _exported(text_cnn.build(SPEC), split, tmp_path / "cnn.onnx")
    assert measure_routing(graph, split) is None and not routes(tmp_path / "cnn.onnx")
    assert routing_drift(tmp_path / "cnn.onnx", _saved(split, tmp_path)) is None
    report = drift_figures(np.array([0.25, 0.75]), np.array([0.25, 0.75]), "binary", LIMITS, "m", None)
    assert report.routing_decisions == 0 and "routing" not in report.summary()
    assert not any("routing" in key for key in report.to_metrics()) and len(report.gated()) == 2


def test_the_routing_limit_parses_and_a_negative_one_is_refused():
    parsed = ServingConfig.parse({"precision": "fp16", "drift_limits": {"max_routing_flip_rate": 0.05}}, "d.yaml")
    assert parsed.drift_limits.max_routing_flip_rate == 0.05 and LIMITS.max_routing_flip_rate == 0.01
    with pytest.raises(
        ServingPrecisionError,
        match=r"d\.yaml: drift_limits\.max_routing_flip_rate: .*greater than or "
        r"equal to 0, got -0\.1",
    ):
        ServingConfig.parse({"drift_limits": {"max_routing_flip_rate": -0.1}}, "d.yaml")
