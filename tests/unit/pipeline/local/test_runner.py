"""The local runner records its run under the id it chose, so that it reads back its own summary.

No ``from __future__ import annotations``: TFX reads the component function's annotations as types."""

import subprocess
import sys
import time
from pathlib import Path

from tfx.dsl.component.experimental.decorators import component
from tfx.orchestration import metadata
from tfx.orchestration import pipeline as tfx_pipeline

from tests.unit.components.promoter.test_serving_protocol import _candidates
from tests.unit.pipeline.local.test_run_lock import _sample
from torchtfx.components.promoter import promotion
from torchtfx.components.shared.mlflow_client import Registry
from torchtfx.pipeline.local import runner
from torchtfx.pipeline.reporting.summary import run_summary


@component
def Noop() -> None:  # TFX names the component after the function
    pass


def test_the_runner_records_the_run_under_the_id_it_chose(tmp_path):
    """With TFX's own id (drawn inside LocalDagRunner) the run could only find 'the newest run' afterwards."""
    connection = metadata.sqlite_metadata_connection_config(str(tmp_path / "metadata.sqlite"))
    pipeline = tfx_pipeline.Pipeline(
        pipeline_name="own-id",
        pipeline_root=str(tmp_path / "tfx"),
        components=[Noop()],
        metadata_connection_config=connection,
    )
    runner._own_run_id_runner("2026-12-07T06:00:00.123456").run(pipeline)
    summary = run_summary(connection, "2026-12-07T06:00:00.123456")
    assert summary is not None and [(s.node, s.state) for s in summary.stages] == [("Noop", "COMPLETE")]


def test_a_run_on_a_root_whose_last_promotion_is_staged_is_refused_at_its_start(tmp_path, taxi_csv):
    """Every local run without a TF Serving address left its promotion staged: the next run trained and
    evaluated for 14 minutes, then its Promoter refused. A real `torchtfx run` now refuses in seconds."""
    root = tmp_path / "root"
    registry = Registry(f"sqlite:///{root / 'mlflow' / 'mlflow.db'}", "torchtfx-taxi")
    target = promotion.ServingTarget(root / "serving" / "taxi", "taxi", registry)
    (root / "mlflow").mkdir(parents=True)
    assert promotion.promote(_candidates(tmp_path, registry)(1.0), target) == 1
    assert promotion.pending_label_move(target) == 1  # what `make run` left before --confirm-labels immediate
    data = _sample(taxi_csv, tmp_path / "data")
    command = [
        str(Path(sys.executable).parent / "torchtfx"),
        "run",
        "--pipeline-root",
        str(root),
        "--data-dir",
        str(data),
    ]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=150)
    seconds = time.monotonic() - started
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    assert f"serving version 1 in {target.serving_dir} was promoted by an earlier run" in out
    assert f"`torchtfx promote --finish --dataset taxi --pipeline-root {root}`" in out
    assert "rerun with `--confirm-labels immediate`" in out and "Traceback" not in out
    assert not (root / "metadata.sqlite").exists()  # no stage ran
    assert seconds < 90, f"refused after {seconds:.0f} s"


def test_a_dataset_of_spans_on_a_root_without_a_matching_span_stops_before_any_stage(tmp_path, taxi_csv, taxi_cfg):
    text = (taxi_cfg.schema_path.parents[2] / "data" / "datasets" / "taxi.yaml").read_text()
    text = text.replace("schema: schema/taxi/schema.pbtxt", f"schema: {taxi_cfg.schema_path}")
    dataset = tmp_path / "taxi_days.yaml"
    dataset.write_text(text + '\nspans: {pattern: "{YYYY}-{MM}-{DD}/*.csv"}\n')
    data = _sample(taxi_csv, tmp_path / "data")  # the CSV at the root, not in a folder a day
    root = tmp_path / "root"
    command = [str(Path(sys.executable).parent / "torchtfx"), "run", "--dataset", str(dataset)]
    command += ["--pipeline-root", str(root), "--data-dir", str(data)]

    done = subprocess.run(command, capture_output=True, text=True, timeout=150)

    assert done.returncode == 1, done.stderr[-3000:]
    assert f"no file under {data} matches the spans pattern '{{YYYY}}-{{MM}}-{{DD}}/*.csv'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (root / "tfx").exists() and not (root / "metadata.sqlite").exists()
