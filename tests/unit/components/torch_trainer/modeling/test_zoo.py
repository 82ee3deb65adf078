"""The zoo models: output shapes, ONNX export parity with onnxruntime, the exported op set, and training."""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.components.torch_trainer.modeling.zoo import dcn, ft_transformer, mlp, resnet

# The ops the ONNX -> TensorFlow translation handles.
SUPPORTED_OPS = frozenset(
    "Gemm MatMul Add Sub Mul Div Pow Sqrt Erf Relu Sigmoid Tanh Softmax LayerNormalization BatchNormalization "
    "Gather Concat Reshape Transpose Unsqueeze Squeeze Slice Split Expand Tile Where Einsum Cast Shape Clip Min "
    "Max ReduceMean ReduceSum Constant ConstantOfShape Identity Equal Flatten Neg Exp".split()
)

Factory = Callable[..., nn.Module]
BUILDS: dict[str, Factory] = {
    "mlp": mlp.build,
    "resnet": resnet.build,
    "dcn": dcn.build,
    "ft_transformer": ft_transformer.build,
}

SPEC = ModelSpec(dense_features=("a", "b", "c"), categorical_features=("x", "y"), cardinalities=(11, 5))
MULTICLASS = ModelSpec(SPEC.dense_features, SPEC.categorical_features, SPEC.cardinalities, "multiclass", 3)
NO_DENSE = ModelSpec((), SPEC.categorical_features, SPEC.cardinalities)
NO_CATEGORICAL = ModelSpec(SPEC.dense_features, (), ())

TRACE_BATCH = 17
RUN_BATCHES = (1, 7, 64)


def _batch(spec: ModelSpec, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    dense = torch.randn(n, len(spec.dense_features), generator=gen)
    columns = [torch.randint(0, card, (n,), generator=gen) for card in spec.cardinalities]
    categorical = torch.stack(columns, dim=1) if columns else torch.zeros(n, 0, dtype=torch.int64)
    return dense, categorical


def _built(name: str, spec: ModelSpec, **hparams) -> nn.Module:
    torch.manual_seed(0)
    return BUILDS[name](spec, **hparams)


class _Probabilities(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.model(dense, categorical))


def _export(model: nn.Module, spec: ModelSpec) -> tuple[nn.Module, onnx.ModelProto]:
    """The eval-mode model behind a sigmoid, and its ONNX graph traced at a batch none of the runs use."""
    # The wrapper itself must be in eval mode: export restores the wrapper's mode, recursively, afterwards.
    wrapped = _Probabilities(model).eval()
    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            wrapped,
            _batch(spec, TRACE_BATCH, seed=1),
            buffer,
            input_names=["dense", "categorical"],
            output_names=["probabilities"],
            dynamic_axes={name: {0: "batch"} for name in ("dense", "categorical", "probabilities")},
            opset_version=17,
            dynamo=False,
        )
    return wrapped, onnx.load_from_string(buffer.getvalue())


@pytest.mark.parametrize("name", BUILDS)
@pytest.mark.parametrize(
    "spec", [SPEC, MULTICLASS, NO_DENSE, NO_CATEGORICAL], ids=["binary", "3-class", "no-dense", "no-cat"]
)
def test_output_has_the_spec_shape(name: str, spec: ModelSpec):
    model = _built(name, spec)
    for train in (True, False):
        out = model.train(train)(*_batch(spec, 7))
        assert out.shape == spec.output_shape(7)
        assert out.dtype == torch.float32


EXPORT_CASES = [
    pytest.param("mlp", SPEC, {}, id="mlp"),
    pytest.param("mlp", MULTICLASS, {}, id="mlp-3-class"),
    pytest.param("mlp", NO_DENSE, {}, id="mlp-no-dense"),
    pytest.param("mlp", NO_CATEGORICAL, {}, id="mlp-no-cat"),
    pytest.param("resnet", SPEC, {}, id="resnet"),
    pytest.param("resnet", MULTICLASS, {"norm": "layernorm"}, id="resnet-layernorm-3-class"),
    pytest.param("resnet", NO_DENSE, {}, id="resnet-no-dense"),
    pytest.param("resnet", NO_CATEGORICAL, {}, id="resnet-no-cat"),
    pytest.param("dcn", SPEC, {}, id="dcn"),
    pytest.param("dcn", MULTICLASS, {"structure": "parallel"}, id="dcn-parallel-3-class"),
    pytest.param("dcn", NO_DENSE, {}, id="dcn-no-dense"),
    pytest.param("dcn", NO_CATEGORICAL, {}, id="dcn-no-cat"),
    pytest.param("ft_transformer", SPEC, {}, id="ft_transformer"),
    pytest.param("ft_transformer", MULTICLASS, {"activation": "geglu"}, id="ft_transformer-geglu-3-class"),
    pytest.param("ft_transformer", NO_DENSE, {}, id="ft_transformer-no-dense"),
    pytest.param("ft_transformer", NO_CATEGORICAL, {}, id="ft_transformer-no-cat"),
]


@pytest.mark.parametrize(("name", "spec", "hparams"), EXPORT_CASES)
def test_onnx_export_matches_torch_at_any_batch_size(name: str, spec: ModelSpec, hparams: dict):
    model = _built(name, spec, **hparams)
    # A few training steps first, so that BatchNorm's running statistics are not the identity.
    _train(model, spec, steps=3)
    wrapped, graph = _export(model, spec)
    # Both inputs must survive: an input the graph does not read is dropped, and consumers feed both.
    assert [i.name for i in graph.graph.input] == ["dense", "categorical"]
    session = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in RUN_BATCHES:
        dense, categorical = _batch(spec, n, seed=n)
        with torch.no_grad():
            expected = wrapped(dense, categorical).numpy()
        (got,) = session.run(None, {"dense": dense.numpy(), "categorical": categorical.numpy()})
        assert got.shape == spec.output_shape(n)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize(("name", "spec", "hparams"), [c for c in EXPORT_CASES if not c.marks])
def test_exported_graph_uses_only_supported_ops(name: str, spec: ModelSpec, hparams: dict):
    _, graph = _export(_built(name, spec, **hparams), spec)
    ops = {node.op_type for node in graph.graph.node}
    assert ops <= SUPPORTED_OPS, f"unsupported ONNX ops: {sorted(ops - SUPPORTED_OPS)}"


def _train(model: nn.Module, spec: ModelSpec, steps: int) -> tuple[float, float]:
    """First and last loss of ``steps`` Adam steps on one fixed random batch (labels for the spec's task)."""
    dense, categorical = _batch(spec, 64, seed=2)
    gen = torch.Generator().manual_seed(3)
    if spec.task == "multiclass":
        labels = torch.randint(0, spec.num_outputs, (64,), generator=gen)
        loss_fn: nn.Module = nn.CrossEntropyLoss()
    else:
        labels = torch.randint(0, 2, (64,), generator=gen).float()
        loss_fn = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(dense, categorical), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses[0], losses[-1]


@pytest.mark.parametrize("name", BUILDS)
def test_a_few_steps_reduce_the_training_loss(name: str):
    model = _built(name, SPEC)
    first, last = _train(model, SPEC, steps=25)
    assert last < 0.8 * first, (first, last)
    assert all(p.grad is not None for p in model.parameters()), "a parameter receives no gradient"


def test_ft_transformer_rejects_ids_outside_a_features_vocabulary():
    # Its categorical features share one embedding table; an id past its feature's cardinality must not
    # silently read the next feature's rows.
    model = _built("ft_transformer", SPEC)
    dense, categorical = _batch(SPEC, 4)
    categorical[2, 0] = SPEC.cardinalities[0]
    with pytest.raises(IndexError, match="column 0"):
        model(dense, categorical)
