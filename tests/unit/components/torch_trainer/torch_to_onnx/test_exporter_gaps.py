"""The exporter's gaps (issue #27 point 1): torch ops the legacy exporter lacks, eval-mode fast paths, and a
model that cannot be exported stopping with the op, the module path and the user's source line."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tensorflow as tf
import torch
from torch import nn

from torchtfx.components.converter.translator import OnnxGraphModule
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.factory import build_model
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.components.torch_trainer.savedmodel.convert import convert_onnx
from torchtfx.components.torch_trainer.torch_to_onnx import dynamo_export, symbolics
from torchtfx.components.torch_trainer.torch_to_onnx.dynamo_export import ModelRecipe
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import ExportError, export_onnx
from torchtfx.data.config.model import ModelConfig

# One call of each entry's torch op on a [batch, 6] float input; every entry of the registry is here.
CALLS = {
    "column_stack": lambda x: torch.column_stack([x[:, 0], x[:, 1:]]),
    "dstack": lambda x: torch.dstack([x, x * 2]).flatten(1),
    "logaddexp": lambda x: torch.logaddexp(x, x.flip(1)),
    "sinc": lambda x: torch.sinc(torch.cat([x, torch.zeros_like(x[:, :1])], 1)),
    "deg2rad": torch.deg2rad,
    "rad2deg": torch.rad2deg,
    "diff": lambda x: torch.diff(x, dim=1),
    "xlogy": lambda x: torch.xlogy(torch.relu(x), x.abs() + 1),
    "special_entr": lambda x: torch.special.entr(torch.relu(x)),
    "trunc": lambda x: torch.trunc(x * 3),
    "frac": lambda x: torch.frac(x * 3),
    "expm1": torch.expm1,
    "hypot": lambda x: torch.hypot(x, x.flip(1)),
    "count_nonzero": lambda x: torch.count_nonzero(torch.relu(x), 1)[:, None].float(),
    "nanmean": lambda x: torch.nanmean(torch.where(x > 1, torch.nan, x), 1, keepdim=True),
    "rms_norm": lambda x: nn.functional.rms_norm(x, (6,), torch.linspace(0.5, 1.5, 6), 1e-6),
    "take_along_dim": lambda x: torch.take_along_dim(x, torch.argsort(x, 1), 1),
    "isin": lambda x: torch.isin(torch.round(x), torch.tensor([0.0, 1.0])).float(),
    "logcumsumexp": lambda x: torch.logcumsumexp(x, 1),
    "uniform": lambda x: x * (torch.zeros_like(x).uniform_() < 2.0),  # a draw that reaches no output
}


class Calls(nn.Module):
    """A tabular network around one op: ``f(dense) -> [batch, k]`` then a linear score."""

    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        return self.fn(dense).sum(1, keepdim=True) + _ids(categorical)


def _ids(categorical: torch.Tensor) -> torch.Tensor:
    """The ids' share of a score: a graph must read both inputs (an unread one leaves the exported graph)."""
    return 0.1 * categorical.float().sum(1, keepdim=True)


def _split(n: int = 64) -> ArraySplit:
    rng = np.random.default_rng(0)
    dense = rng.normal(size=(n, 6)).astype(np.float32)
    return ArraySplit(dense, rng.integers(0, 3, (n, 2)), rng.integers(0, 2, n).astype(np.float32))


def test_every_registry_entry_is_exercised_here():
    assert set(CALLS) == set(symbolics.SYMBOLICS)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_each_symbolic_exports_its_op_with_torchs_semantics(name, tmp_path, caplog):
    head = ExportHead(Calls(CALLS[name]), "regression").eval()
    with caplog.at_level(logging.INFO, logger=symbolics.__name__):
        report = export_onnx(head, _split(), tmp_path / "model.onnx")
    assert name in report.symbolics
    assert any(f"aten::{name}" in r.getMessage() for r in caplog.records)
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    split = _split(33)
    (got,) = session.run(None, {"dense": split.dense, "categorical": split.categorical})
    with torch.no_grad():
        want = head(torch.from_numpy(split.dense), torch.from_numpy(split.categorical)).numpy()
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-5)


def test_the_symbolics_are_registered_only_during_the_export(tmp_path):
    head = ExportHead(Calls(CALLS["column_stack"]), "regression").eval()
    export_onnx(head, _split(), tmp_path / "m.onnx")
    assert not symbolics._torch_has("aten::column_stack", 17)


class ColumnStackEnsemble(nn.Module):
    """The failure kind of a published tabular ensemble: members' scores joined with ``torch.column_stack``."""

    def __init__(self) -> None:
        super().__init__()
        self.members = nn.ModuleList(nn.Linear(6, 1) for _ in range(3))

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        scores = torch.column_stack([m(dense).squeeze(1) for m in self.members])
        return scores.mean(1, keepdim=True) + _ids(categorical)


def test_a_column_stack_ensemble_exports(tmp_path):
    report = export_onnx(ExportHead(ColumnStackEnsemble(), "binary").eval(), _split(), tmp_path / "m.onnx")
    assert report.symbolics == ("column_stack",)


class Encoder(nn.Module):
    """torch's own ``nn.TransformerEncoder`` over per-feature tokens, as researchers write it first."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(1, 8)
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(8, 1)

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        return self.out(self.encoder(self.embed(dense[:, :, None])).mean(1)) + _ids(categorical)


def test_torchs_transformer_encoder_exports_with_its_fast_path_off(tmp_path):
    head = ExportHead(Encoder(), "binary").eval()
    assert torch.backends.mha.get_fastpath_enabled()
    export_onnx(head, _split(), tmp_path / "m.onnx")
    assert torch.backends.mha.get_fastpath_enabled()  # restored
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    split = _split(9)
    (got,) = session.run(None, {"dense": split.dense, "categorical": split.categorical})
    with torch.no_grad():
        want = head(torch.from_numpy(split.dense), torch.from_numpy(split.categorical)).numpy()
    np.testing.assert_allclose(got.reshape(want.shape), want, atol=1e-5)


class Unexportable(nn.Module):
    """``erfinv`` has no ONNX form: the inverse error function is not an ONNX operator."""

    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(6, 4), _Erfinv())

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        return self.block(dense).sum(1, keepdim=True) + _ids(categorical)


class _Erfinv(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.erfinv(torch.tanh(x) * 0.5)


def test_an_unexportable_op_names_the_op_module_and_source_line_without_a_graph_dump(tmp_path, capfd):
    with pytest.raises(ExportError) as caught:
        export_onnx(ExportHead(Unexportable(), "binary").eval(), _split(), tmp_path / "m.onnx")
    message = str(caught.value)
    assert "aten::erfinv" in message
    assert "module model.block.1 (_Erfinv)" in message
    assert f"{__file__}:" in message and "torch.erfinv(torch.tanh(x) * 0.5)" in message
    assert "Fix:" in message and len(message.splitlines()) == 1
    captured = capfd.readouterr()
    assert "graph(" not in captured.err and "Torch IR graph" not in captured.err
    assert not (tmp_path / "m.onnx").exists()


RESEARCH = "tests.unit.components.torch_trainer.research_models"


def test_where_the_legacy_exporter_fails_the_dynamo_exporter_runs_in_its_own_process(tmp_path):
    spec = ModelSpec(("a", "b", "c", "d", "e", "f"), ("x", "y"), (3, 3))
    config = ModelConfig(factory=f"{RESEARCH}:median_centered")
    head = ExportHead(build_model(config, spec), "binary").eval()
    with pytest.raises(ExportError, match=r"aten::quantile.*module model \(MedianCentered\)"):
        export_onnx(head, _split(), tmp_path / "legacy.onnx")  # no recipe: nothing can rebuild the model
    report = export_onnx(head, _split(), tmp_path / "m.onnx", ModelRecipe(config, spec, "binary"))
    assert report.exporter == "dynamo"
    model = onnx.load(str(tmp_path / "m.onnx"))
    assert {"TopK", "GatherElements"} & {n.op_type for n in model.graph.node}
    split = _split(11)
    got = OnnxGraphModule(model)(tf.constant(split.dense), tf.constant(split.categorical))[0].numpy()
    with torch.no_grad():
        want = head(torch.from_numpy(split.dense), torch.from_numpy(split.categorical)).numpy()
    np.testing.assert_allclose(got.reshape(want.shape), want, atol=1e-5)


def test_without_its_packages_the_dynamo_route_says_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv(dynamo_export.PACKAGES_ENV, str(tmp_path / "nowhere"))
    spec = ModelSpec(("a", "b", "c", "d", "e", "f"), ("x", "y"), (3, 3))
    config = ModelConfig(factory=f"{RESEARCH}:median_centered")
    head = ExportHead(build_model(config, spec), "binary").eval()
    with pytest.raises(ExportError, match=r"aten::quantile.*dynamo exporter failed too: .*not installed"):
        export_onnx(head, _split(), tmp_path / "m.onnx", ModelRecipe(config, spec, "binary"))


@pytest.mark.parametrize(
    ("factory", "ops"),
    [("periodic_mlp", {"Sin", "Cos"}), ("top2_moe", {"CumSum", "OneHot", "Pad", "TopK"})],
)
def test_periodic_embeddings_and_a_top2_moe_translate_without_onnx2tf(tmp_path, factory, ops):
    """Two of the failure kinds: the translator lacked Sin/Cos, and CumSum/OneHot/Pad (onnx2tf failed too)."""
    spec = ModelSpec(("a", "b", "c", "d", "e", "f"), ("x", "y"), (3, 3))
    torch.manual_seed(0)
    head = ExportHead(build_model(ModelConfig(factory=f"{RESEARCH}:{factory}"), spec), "binary").eval()
    export_onnx(head, _split(), tmp_path / "m.onnx")
    assert ops <= {n.op_type for n in onnx.load(str(tmp_path / "m.onnx")).graph.node}
    conversion = convert_onnx(tmp_path / "m.onnx", tmp_path / "work")
    assert conversion.strategy == "translator"
    for rows in (1, 7, 64):
        split = _split(rows)
        got = conversion.network(tf.constant(split.dense), tf.constant(split.categorical))[0].numpy()
        with torch.no_grad():
            want = head(torch.from_numpy(split.dense), torch.from_numpy(split.categorical)).numpy()
        np.testing.assert_allclose(got.reshape(want.shape), want, atol=1e-5)


def test_a_dynamo_graph_with_the_batch_size_fixed_is_refused_naming_the_cause(tmp_path):
    spec = ModelSpec(("a", "b", "c", "d", "e", "f"), ("x", "y"), (3, 3))
    config = ModelConfig(factory=f"{RESEARCH}:batch_specialized")
    head = ExportHead(build_model(config, spec), "binary").eval()
    with pytest.raises(ExportError, match=r"aten::quantile.*dynamo exporter fixed the batch size of dense, categ"):
        export_onnx(head, _split(), tmp_path / "m.onnx", ModelRecipe(config, spec, "binary"))
    assert not (tmp_path / "m.onnx").exists()
