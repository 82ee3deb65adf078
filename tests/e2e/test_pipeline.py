"""End-to-end: the real pipeline (LocalDagRunner, Beam, sqlite MLMD + MLflow) run through the CLI
exactly as a user runs it, on small samples."""

from __future__ import annotations

import csv
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests import helpers
from tests.fakes.model_server import FakeModelServer, State
from torchtfx.components.tf_serving import model_config
from torchtfx.components.tf_serving.model_config import ServedState
from torchtfx.data.synthetic_loans import write_csv

pytestmark = pytest.mark.e2e

SAMPLE_ROWS = 3000
ALL_NODES = {
    "CsvExampleGen",
    "StatisticsGen",
    "ImportSchemaGen",
    "ExampleValidator",
    "DataGate",
    "Transform",
    "TorchTrainer",
    "ChampionModel",
    "Evaluator",
    "Promoter",
}
REJECTED = 3  # torchtfx run's exit code for a candidate a gate rejected


def torchtfx(*args: str, command: str = "run", env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchtfx.pipeline.cli.main", command, *args],
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, **(env or {})},
    )


def run_on(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``torchtfx run`` on ``root``'s ``data/`` folder, its pipeline root ``pipeline/`` and serving dir ``serving/``."""
    folders = ("--data-dir", str(root / "data"), "--pipeline-root", str(root / "pipeline"))
    return torchtfx(*folders, "--serving-dir", str(root / "serving"), *args, env=env)


def registry(root: Path):
    from torchtfx.components.shared.mlflow_client import Registry

    return Registry(f"sqlite:///{root / 'pipeline' / 'mlflow' / 'mlflow.db'}", "torchtfx-taxi")


@pytest.fixture(scope="module")
def taxi_rows(taxi_csv):
    return helpers.csv_rows(taxi_csv, SAMPLE_ROWS)


# Credentials in the environment (the sqlite store ignores them): they must never reach logs or MLMD.
SECRET_ENV = {"MLFLOW_TRACKING_USERNAME": "e2e-user", "MLFLOW_TRACKING_PASSWORD": "pw-3f9c2a7e-never-log-me"}


@pytest.fixture(scope="module")
def model_server():
    """TEST DOUBLE of TF Serving's ModelService (tests/fakes/model_server.py; the real server cannot run here),
    with its label rules: the taxi runs of this module promote through it with --serving-address."""
    server = FakeModelServer(load_seconds=0.5).start()
    yield server
    server.stop()


def serving(root: Path, server: FakeModelServer) -> tuple[str, ...]:
    return ("--serving-dir", str(root / "serving"), "--serving-address", server.address)


@pytest.fixture(scope="module")
def taxi_run(tmp_path_factory, taxi_rows, model_server):
    """The first run, on data with categorical values the schema has never seen (case 10 of the catalogue:
    they must not stop the run): new companies, and a new payment type in < 1% of the rows."""
    root = tmp_path_factory.mktemp("taxi_e2e")
    rows = [dict(r) for r in taxi_rows]
    for row in rows[::40]:
        row["company"] = "Brand New Cab Co"
    for row in rows[::250]:
        row["payment_type"] = "Crypto"  # 0.4%: the schema tolerates < 1% unknown payment types
    data = helpers.write_sample(rows, root / "data", list(taxi_rows[0]))
    proc = torchtfx(
        "--data-dir",
        str(data),
        "--pipeline-root",
        str(root / "pipeline"),
        *serving(root, model_server),
        "--epochs",
        "6",
        env=SECRET_ENV,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return root, proc


def test_first_run_runs_every_component_and_promotes_version_1(taxi_run):
    """Promotion scenario 1: no champion yet; value gates alone decide; version 1 becomes champion."""
    root, proc = taxi_run
    summary = helpers.metadata(root / "pipeline")
    assert {s.node for s in summary.stages} == ALL_NODES
    assert all(s.state == "COMPLETE" for s in summary.stages), summary.stages
    assert summary.blessed is True
    assert summary.parity is not None and summary.parity <= 1e-5
    assert summary.ddp_workers == 1  # 2,000 training rows train in the pipeline's own process (num_workers auto)
    assert "Training workers: 1\n" in proc.stdout
    # TFX Pusher's PushedModel properties, names and types (pushed_version is a string).
    assert summary.custom("Promoter", "pushed_model", "pushed") == 1
    assert summary.custom("Promoter", "pushed_model", "pushed_version") == "1"
    assert (root / "serving" / "1" / "saved_model.pb").is_file()
    from torchtfx.components.torch_trainer.savedmodel.warmup import WARMUP_BATCH_SIZES, replay_warmup

    # The version's TF Serving warmup requests (assets.extra) run through its serving_default.
    replayed = replay_warmup(root / "serving" / "1")
    assert [r.outputs["probabilities"].shape for r in replayed] == [(n,) for n in WARMUP_BATCH_SIZES]
    assert f"pushed model: {root / 'serving' / '1'}" in proc.stdout
    assert model_config.read_state(root / "serving") == ServedState(frozenset({1}), {"stable": 1, "canary": 1})
    assert registry(root).serving_version("champion") == 1
    assert "auc=" in proc.stdout and "MLflow run:" in proc.stdout
    report = Path(proc.stdout.split("Report: ")[1].split()[0])
    assert report.is_file() and (report.parent / "calibration.png").is_file()
    assert (report.parent / "loss_curves.png").is_file() and "Parity" in report.read_text()


def test_default_console_is_quiet(taxi_run):
    """Issue #30: stage lines, one progress line per long stage, warnings and the summary; `make run` printed
    126 lines before, most of them known-harmless third-party messages (now dropped: pipeline/cli/console.py)."""
    _, proc = taxi_run
    lines = proc.stderr.splitlines() + proc.stdout.splitlines()
    assert len(lines) <= 40, "\n".join(lines)
    assert "Component Transform is running." in proc.stderr and "Checked the CSV files" in proc.stderr
    assert "Training done: best epoch" in proc.stderr and "Pipeline run" in proc.stdout
    for harmless in ("ArtifactQuery.property_predicate", "Unable to register cuFFT", "non-supported Python"):
        assert harmless not in proc.stderr


def test_pushed_model_serves_raw_examples_in_a_tensorflow_only_process(taxi_run, taxi_rows, taxi_cfg):
    root, _ = taxi_run
    version = root / "serving" / "1"
    schema = helpers.read_schema(taxi_cfg.schema_path)
    requests = root / "requests.tfrecord"
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(requests)) as writer:
        for row in taxi_rows[:32]:
            row = {k: v for k, v in row.items() if k != "tips"}  # no label in a serving request
            writer.write(helpers.row_to_example(row, schema).SerializeToString())
    script = textwrap.dedent(f"""
        import sys
        import tensorflow as tf
        model = tf.saved_model.load({str(version)!r})
        batch = tf.constant([r.numpy() for r in tf.data.TFRecordDataset({str(requests)!r})])
        probs = model.signatures["serving_default"](examples=batch)["probabilities"].numpy()
        assert probs.shape == (32,) and ((probs >= 0) & (probs <= 1)).all(), probs
        leaked = [m for m in ("torch", "tensorflow_transform", "onnx2tf") if m in sys.modules]
        assert not leaked, leaked
        print("served", probs.shape[0], "mean", float(probs.mean()))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "served 32" in proc.stdout


def _serve(version: Path, script: str) -> subprocess.CompletedProcess:
    """Run ``script`` against the pushed model in a fresh process that imports TensorFlow only."""
    prelude = f"import tensorflow as tf\nmodel = tf.saved_model.load({str(version)!r})\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(script)], capture_output=True, text=True, timeout=300
    )


def test_registry_champion_is_an_mlflow_model_that_predicts_like_the_saved_model(taxi_run, taxi_cfg):
    """`mlflow.pyfunc.load_model("models:/torchtfx-taxi@champion")` in a fresh process, on a DataFrame read
    from the CSV (label dropped), against serving_default on the same rows encoded by the tests' own encoder."""
    root, _ = taxi_run
    csv_path = root / "data" / "data.csv"
    schema = helpers.read_schema(taxi_cfg.schema_path)
    rows = [{k: v for k, v in r.items() if k != "tips"} for r in helpers.csv_rows(csv_path, 64)]
    requests = root / "pyfunc_requests.tfrecord"
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(requests)) as writer:
        for row in rows:
            writer.write(helpers.row_to_example(row, schema).SerializeToString())
    uri = f"sqlite:///{root / 'pipeline' / 'mlflow' / 'mlflow.db'}"
    script = textwrap.dedent(f"""
        import mlflow, numpy as np, pandas as pd, tensorflow as tf
        mlflow.set_tracking_uri({uri!r}); mlflow.set_registry_uri({uri!r})
        frame = pd.read_csv({str(csv_path)!r}, nrows=64).drop(columns=["tips"])
        served = mlflow.pyfunc.load_model("models:/torchtfx-taxi@champion").predict(frame)["probabilities"].to_numpy()
        model = tf.saved_model.load({str(root / "serving" / "1")!r})
        batch = tf.constant([r.numpy() for r in tf.data.TFRecordDataset({str(requests)!r})])
        expected = model.signatures["serving_default"](examples=batch)["probabilities"].numpy()
        print("max_abs_diff", float(np.max(np.abs(served - expected))), served.shape[0])
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, diff, count = proc.stdout.strip().splitlines()[-1].split()
    assert int(count) == 64 and float(diff) <= 1e-6, proc.stdout


def test_predict_scores_every_row_with_the_champion_as_its_saved_model_does(taxi_run, taxi_cfg):
    """Issue #30: `torchtfx predict` with the pipeline's champion on the run's own CSV (label included: it is not
    read), every row scored, each equal to serving_default on the row encoded by the tests' own encoder."""
    root, _ = taxi_run
    csv_path, out = root / "data" / "data.csv", root / "predict" / "scores.csv"
    proc = torchtfx(
        "--data",
        str(csv_path),
        "--out",
        str(out),
        "--pipeline-root",
        str(root / "pipeline"),
        "--serving-dir",
        str(root / "serving"),
        command="predict",
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = helpers.csv_rows(csv_path)
    assert f"Scored {len(rows):,} rows of 1 file(s) with serving version 1 (registry version 1" in proc.stdout
    with out.open(newline="") as handle:
        scored = {int(r["source_line"]): float(r["probabilities"]) for r in csv.DictReader(handle)}
    assert sorted(scored) == list(range(2, len(rows) + 2))
    import tensorflow as tf

    schema = helpers.read_schema(taxi_cfg.schema_path)
    examples = tf.constant([helpers.row_to_example(row, schema).SerializeToString() for row in rows])
    model = tf.saved_model.load(str(root / "serving" / "1"))
    expected = model.signatures["serving_default"](examples=examples)["probabilities"].numpy()
    assert np.max(np.abs(np.array([scored[line] for line in sorted(scored)]) - expected)) <= 1e-6


def test_bad_input_10_unseen_categorical_values_go_to_the_oov_bucket(taxi_run, taxi_rows, taxi_cfg):
    """New categories in the data did not stop the run (fixture); a value never seen in training is mapped by
    the pushed model's own transform into one of the OOV buckets, after the vocabulary's ids."""
    root, _ = taxi_run
    version = root / "serving" / "1"
    vocabulary = (version / "assets" / "company").read_text().splitlines()
    assert "Brand New Cab Co" in vocabulary  # seen in training: an ordinary id
    row = {**taxi_rows[0], "company": "Never Seen Cab Co"}  # transform_features (TFMA's view) wants the label
    example = helpers.row_to_example(row, helpers.read_schema(taxi_cfg.schema_path)).SerializeToString()
    proc = _serve(
        version,
        f"""
        out = model.signatures["transform_features"](examples=tf.constant([{example!r}]))
        print("company_xf", int(out["company_xf"].numpy().reshape(-1)[0]))
    """,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    company_id = int(proc.stdout.split("company_xf")[1].split()[0])
    assert len(vocabulary) <= company_id < len(vocabulary) + taxi_cfg.vocab_num_oov_buckets


def test_bad_input_13_serving_requests_with_missing_features_or_wrong_dtypes_get_clear_errors(taxi_run):
    """Real tf.Examples through the pushed signature: a required feature missing, and a string where the
    schema says float, are refused by the signature with the feature's name; an optional feature may be absent."""
    root, _ = taxi_run
    proc = _serve(
        root / "serving" / "1",
        """
        def example(features):
            feature = {}
            for key, value in features.items():
                if isinstance(value, float):
                    feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
                elif isinstance(value, int):
                    feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
                else:
                    feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
            return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
        good = {"fare": 12.5, "trip_miles": 3.1, "trip_seconds": 600, "payment_type": "Cash",
                 "trip_start_hour": 9, "trip_start_day": 3, "trip_start_month": 5, "trip_start_timestamp": 1400000000}
        serve = model.signatures["serving_default"]
        print("optional-missing", float(serve(examples=tf.constant([example(good)]))["probabilities"].numpy()[0]))
        for name, features in (("missing", {k: v for k, v in good.items() if k != "fare"}),
                               ("dtype", {**good, "fare": "twelve"})):
            try:
                serve(examples=tf.constant([example(features)]))
                print(name, "ACCEPTED")
            except tf.errors.InvalidArgumentError as err:
                lines = err.message.splitlines()
                print(name, "REFUSED", next((l for l in lines if "Feature:" in l or "Key:" in l), lines[-1]))
    """,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(
        line.split(" ", 1)
        for line in proc.stdout.splitlines()
        if line.split(" ")[0] in ("optional-missing", "missing", "dtype")
    )
    assert 0.0 <= float(lines["optional-missing"]) <= 1.0  # absent optional features take the schema defaults
    assert lines["missing"].startswith("REFUSED") and "fare" in lines["missing"], lines
    assert lines["dtype"].startswith("REFUSED") and "fare" in lines["dtype"], lines


def test_security_credentials_never_reach_logs_or_execution_properties(taxi_run):
    root, proc = taxi_run
    secret = SECRET_ENV["MLFLOW_TRACKING_PASSWORD"]
    assert secret not in proc.stdout + proc.stderr
    from ml_metadata.metadata_store import metadata_store
    from tfx.orchestration import metadata as tfx_metadata

    store = metadata_store.MetadataStore(
        tfx_metadata.sqlite_metadata_connection_config(str(root / "pipeline" / "metadata.sqlite"))
    )
    properties = " ".join(str(e.custom_properties) + str(e.properties) for e in store.get_executions())
    assert secret not in properties and helpers.find_credentials(properties) == []
    logs = " ".join(p.read_text(errors="ignore") for p in (root / "pipeline").rglob("*.log"))
    assert secret not in logs


def test_fault_mlflow_unreachable_fails_before_training_by_default(taxi_run, tmp_path):
    """A tracking server address with nothing listening (a bound, never-listening port): the default policy
    stops the run before any component, with the fix in the message; production is untouched."""
    root, _ = taxi_run
    before, aliases = helpers.tree_digest(root / "serving"), _aliases(root)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{closed.getsockname()[1]}"
        proc = torchtfx(
            "--data-dir",
            str(root / "data"),
            "--pipeline-root",
            str(tmp_path / "pipeline"),
            "--serving-dir",
            str(root / "serving"),
            env={"MLFLOW_TRACKING_URI": uri},
        )
    assert proc.returncode == 1
    assert f"Error: the MLflow tracking server at {uri} is unreachable (ConnectionError: connection refused). " in (
        proc.stderr
    ), proc.stderr[-2000:]
    assert "--mlflow-unreachable continue" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "pipeline" / "metadata.sqlite").exists()  # nothing started
    assert helpers.tree_digest(root / "serving") == before and _aliases(root) == aliases


def test_second_dataset_runs_from_config_and_schema_alone(tmp_path):
    data = tmp_path / "loans"
    write_csv(data, rows=2500)
    proc = torchtfx(
        "--dataset",
        "loans",
        "--data-dir",
        str(data),
        "--pipeline-root",
        str(tmp_path / "pipeline"),
        "--serving-dir",
        str(tmp_path / "serving"),
        "--epochs",
        "8",
        "--auc-threshold",
        "0.65",
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = helpers.metadata(tmp_path / "pipeline")
    assert summary.blessed is True and summary.pushed_to
    assert all(s.state == "COMPLETE" for s in summary.stages)


def test_worse_model_is_rejected_and_production_is_byte_identical(taxi_run, model_server):
    """Promotion scenario 2: one optimizer step of training; the gates against the champion refuse it."""
    root, _ = taxi_run
    before, champion = helpers.tree_digest(root / "serving"), registry(root).alias_version("champion").version
    proc = torchtfx(
        "--data-dir",
        str(root / "data"),
        "--pipeline-root",
        str(root / "pipeline"),
        *serving(root, model_server),
        "--epochs",
        "1",
        "--batch-size",
        "100000",
    )
    assert proc.returncode == REJECTED, proc.stderr[-3000:]
    assert "Candidate REJECTED" in proc.stderr
    assert "auc" in proc.stderr and "change gate: candidate - champion >= -0.01" in proc.stderr
    assert helpers.tree_digest(root / "serving") == before  # versions, models.config, batching: untouched
    assert registry(root).alias_version("champion").version == champion
    assert registry(root).alias_version("challenger").tags["rejected"] == "true"


def test_good_model_is_promoted_and_previous_points_to_the_former_champion(taxi_run, model_server):
    """Promotion scenario 3: a properly trained model (another seed) passes the change gates."""
    root, _ = taxi_run
    former = registry(root).alias_version("champion").version
    proc = torchtfx(
        "--data-dir",
        str(root / "data"),
        "--pipeline-root",
        str(root / "pipeline"),
        *serving(root, model_server),
        "--epochs",
        "6",
        "--seed",
        "7",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    reg = registry(root)
    assert reg.alias_version("previous").version == former
    assert reg.serving_version("champion") == 2
    assert model_config.read_state(root / "serving") == ServedState(frozenset({1, 2}), {"stable": 2, "canary": 2})


def test_rollback_restores_the_former_champion_and_is_idempotent(taxi_run, model_server):
    """Promotion scenario 4: `torchtfx promote --rollback`, twice."""
    root, _ = taxi_run
    args = ("--pipeline-root", str(root / "pipeline"), *serving(root, model_server))
    first = torchtfx("--rollback", *args, command="promote")
    assert first.returncode == 0 and "rolled back" in first.stdout, first.stderr[-2000:]
    assert registry(root).serving_version("champion") == 1
    assert model_config.read_stable_version(root / "serving") == 1
    state = helpers.tree_digest(root / "serving")
    second = torchtfx("--rollback", *args, command="promote")
    assert second.returncode == 0 and "nothing to roll back" in second.stdout
    assert helpers.tree_digest(root / "serving") == state and registry(root).serving_version("champion") == 1


def _rerun_changes_nothing(root: Path, server: FakeModelServer, *args: str) -> subprocess.CompletedProcess:
    """Rerun a run's own command (the MLMD cache hands back its trained model); nothing under the serving
    directory, in the registry or at TF Serving may change."""
    reg = registry(root)
    before = (
        helpers.tree_digest(root / "serving"),
        reg.client.search_model_versions(f"name='{reg.model_name}'"),
        _aliases(root),
        len(server.history),
    )
    proc = torchtfx(
        "--data-dir", str(root / "data"), "--pipeline-root", str(root / "pipeline"), *serving(root, server), *args
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    stages = {s.node: s.state for s in helpers.metadata(root / "pipeline").stages}
    assert stages["TorchTrainer"] == "CACHED" and stages["Promoter"] == "COMPLETE", stages
    after = (
        helpers.tree_digest(root / "serving"),
        reg.client.search_model_versions(f"name='{reg.model_name}'"),
        _aliases(root),
        len(server.history),
    )
    assert after[0] == before[0]  # every version, models.config, the batching file: byte-identical
    assert [v.version for v in after[1]] == [v.version for v in before[1]]  # no new registry version
    assert after[2:] == before[2:]  # aliases; no ModelService reload
    assert "Promoted" not in proc.stdout and "REJECTED" not in proc.stderr
    return proc


def test_rerun_on_unchanged_data_and_code_pushes_and_registers_nothing(taxi_run, model_server):
    """Issue #16.5. After the rollback, the champion is the first run's model: rerunning the first run's command
    is a no-op that says so. Rerunning the rolled-back run's command (seed 7) does not put it back."""
    root, _ = taxi_run
    proc = _rerun_changes_nothing(root, model_server, "--epochs", "6")
    assert (
        "Nothing to promote. The candidate is identical to the champion (serving version 1, registry version 1; "
        "model fingerprint sha256-tree-v1:"
    ) in proc.stdout, proc.stdout[-3000:]
    assert "nothing was pushed or registered. models.config and TF Serving were left as they were." in proc.stdout
    proc = _rerun_changes_nothing(root, model_server, "--epochs", "6", "--seed", "7")
    assert (
        "Nothing to promote. The candidate is identical to serving version 2 (registry version 3), which was "
        "rolled back: it is not promoted again by a rerun"
    ) in proc.stdout, proc.stdout[-3000:]
    assert "torchtfx promote --version 3 --reason" in proc.stdout


def test_tf_serving_accepted_every_config_and_labels_moved_only_onto_available_versions(taxi_run, model_server):
    """Across the runs above (promote 1, reject, promote 2, roll back): what a live TF Serving received."""
    refused = [(config, outcome) for config, outcome in model_server.history if outcome != "OK"]
    assert refused == []
    moves = [(label, version) for label, version, _state in model_server.label_moves]
    assert ("stable", 1) in moves and ("stable", 2) in moves
    assert all(state == State.AVAILABLE for *_, state in model_server.label_moves), model_server.label_moves


def _set(column: str, value: str, every: int = 1):
    def mutate(rows: list[dict], fields: list[str]) -> tuple[list[dict], list[str]]:
        for row in rows[::every]:
            row[column] = value
        return rows, fields

    return mutate


def _drop(column: str):
    return lambda rows, fields: (rows, [f for f in fields if f != column])


def _add(column: str, value: str):
    return lambda rows, fields: ([{**r, column: value} for r in rows], [*fields, column])


# The bad-input catalogue (issue #5): the data, where the run must stop, and what the user must read.
BAD_INPUT = {
    "02_required_column_missing": (_drop("fare"), ["column 'fare': Column dropped"]),
    "03_unexpected_extra_column": (_add("surge", "1.5"), ["column 'surge': New column"]),
    # 04 (text in a numeric column) stops in ExampleGen, by file, line and column: tests/e2e/test_input_data.py
    "06_required_column_all_null": (_set("fare", ""), ["column 'fare'", "not present in any examples"]),
    "06_optional_column_all_null": (_set("company", ""), ["column 'company'", "not present in any examples"]),
    "07_label_column_missing": (_drop("tips"), ["column 'tips': Column dropped"]),
    "07_label_invalid_values": (_set("tips", "-3.5", 40), ["column 'tips': Out-of-range values", "-3.5<0"]),
    # "nan" is one of the default missing-value markers: a required column with a missing value
    "08_nan_in_numeric_feature": (_set("trip_miles", "nan", 40), ["column 'trip_miles'", "not always present"]),
    "08_inf_in_numeric_feature": (_set("trip_miles", "inf", 40), ["column 'trip_miles'", "has Inf values"]),
    "11_drift_from_the_champion_training_data": (
        _set("payment_type", "Cash"),
        ["column 'payment_type': drift from the champion's training data: The Linfty distance"],
    ),
    "09_value_outside_schema_range": (
        _set("trip_start_hour", "31", 40),
        ["column 'trip_start_hour': Out-of-range values", "Unexpectedly large value: 31"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_stops_before_training_and_production_is_byte_identical(taxi_run, taxi_rows, tmp_path, case):
    """Bad-input catalogue: the run stops at the data gate with a message naming the column and the problem;
    serving dir, models.config and the registry aliases are byte-identical (same pipeline root and registry)."""
    root, _ = taxi_run
    mutate, expected = BAD_INPUT[case]
    before, aliases = helpers.tree_digest(root / "serving"), _aliases(root)
    rows, fields = mutate([dict(r) for r in taxi_rows[:1500]], list(taxi_rows[0]))
    data = helpers.write_sample(rows, tmp_path / "data", fields)
    proc = torchtfx(
        "--data-dir", str(data), "--pipeline-root", str(root / "pipeline"), "--serving-dir", str(root / "serving")
    )
    assert proc.returncode == 1
    assert "data validation failed" in proc.stderr, proc.stderr[-3000:]
    assert all(text in proc.stderr for text in expected), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    ran = {s.node for s in helpers.metadata(root / "pipeline").stages}
    assert not ran & {"Transform", "TorchTrainer", "Evaluator", "Promoter"}, ran
    assert helpers.tree_digest(root / "serving") == before and _aliases(root) == aliases


def test_bad_input_01_malformed_csv_line_stops_in_example_gen(taxi_run, taxi_rows, tmp_path):
    root, _ = taxi_run
    before, aliases = helpers.tree_digest(root / "serving"), _aliases(root)
    data = helpers.write_sample(taxi_rows[:300], tmp_path / "data", list(taxi_rows[0]))
    lines = (data / "data.csv").read_text().splitlines()
    lines[120] += ",oops"  # one field too many on line 121
    (data / "data.csv").write_text("\n".join(lines) + "\n")
    proc = torchtfx(
        "--data-dir", str(data), "--pipeline-root", str(root / "pipeline"), "--serving-dir", str(root / "serving")
    )
    assert proc.returncode == 1
    assert f"Error: {data / 'data.csv'}, line 121: 19 fields where the header has 18" in proc.stderr, proc.stderr[
        -3000:
    ]
    assert "Traceback" not in proc.stderr
    assert helpers.tree_digest(root / "serving") == before and _aliases(root) == aliases


def _aliases(root: Path) -> dict[str, str | None]:
    reg = registry(root)
    return {a: getattr(reg.alias_version(a), "version", None) for a in ("champion", "previous", "challenger")}
