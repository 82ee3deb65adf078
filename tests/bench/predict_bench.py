"""``python -m tests.bench --only predict`` (issue 30): batch scoring, rows per second, of ``torchtfx predict`` against
what a user would otherwise write, on the same CSV with the same champion, each from reading the CSV to a written
file of scores:
- ``loop``: a plain Python loop over the SavedModel: the csv module, the schema's tf.Example encoding, one
  ``serving_default`` call per 1,024 rows, the csv module again;
- ``pyfunc``: the champion's MLflow Model (``mlflow.pyfunc.load_model("models:/<name>@champion")``) on the whole
  CSV read by pandas, as ``mlflow models predict`` does, scores written by pandas.
The input is the taxi CSV ``COPIES`` times over; one untimed round of every way first (each imports what it
needs and loads the model once, which a long-lived scorer pays once), then ``ROUNDS`` interleaved rounds, whose
medians are reported with their min and max.

Then memory at scale: ``torchtfx predict`` as a command on ``SCALE_ROWS`` rows (the taxi CSV repeated), its peak
PSS summed over its process tree (Beam's worker processes included) against ``SCALE_PSS_TARGET_GIB``.
"""

from __future__ import annotations

import csv
import itertools
import logging
import statistics
import sys
import time
from pathlib import Path

logger = logging.getLogger(__name__)

COPIES = 10  # 150,020 rows of taxi
ROUNDS = 3
LOOP_BATCH = 1024
TARGET_VS_LOOP = 1.5  # issue 45: rows/s at least 1.5x the plain loop's
SCALE_ROWS = 5_000_000
SCALE_PSS_TARGET_GIB = 2.0


def _input(source_dir: Path, work: Path, rows: int = 0) -> tuple[Path, int]:
    """One CSV: the packaged taxi CSV's header, then its rows ``COPIES`` times (or repeated up to ``rows``)."""
    (source,) = sorted(source_dir.glob("*.csv"))
    lines = source.read_text().splitlines(keepends=True)
    body = lines[1:]
    wanted = rows or COPIES * len(body)
    path = work / "input" / f"taxi_{wanted}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        out.write(lines[0])
        for _ in range(wanted // len(body)):
            out.writelines(body)
        out.writelines(body[: wanted % len(body)])
    return path, wanted


def _loop(path: Path, serving_dir: Path, dataset, out: Path) -> int:
    import tensorflow as tf

    from torchtfx.components.shared.served_interface import EXAMPLES_INPUT, PROBABILITIES_OUTPUT, SERVING_SIGNATURE
    from torchtfx.data.csv_reader.columns import ColumnPlan, load_schema_types

    serve = tf.saved_model.load(str(serving_dir)).signatures[SERVING_SIGNATURE]
    rows = 0
    with path.open(newline="") as source, out.open("w", newline="") as sink:
        reader, writer = csv.reader(source), csv.writer(sink)
        types = load_schema_types(str(dataset.schema_path))
        plan = ColumnPlan(next(reader), types, missing_values=dataset.missing_values)
        writer.writerow(["row", PROBABILITIES_OUTPUT])
        while batch := [plan.to_example(r).SerializeToString() for r in itertools.islice(reader, LOOP_BATCH)]:
            scores = serve(**{EXAMPLES_INPUT: tf.constant(batch)})[PROBABILITIES_OUTPUT].numpy()
            writer.writerows((rows + i, float(s)) for i, s in enumerate(scores))
            rows += len(batch)
    return rows


def _pyfunc(path: Path, model_uri: str, out: Path) -> int:
    import mlflow.pyfunc
    import pandas as pd

    model = mlflow.pyfunc.load_model(model_uri)
    columns = model.metadata.get_input_schema().input_names()
    strings = [c.name for c in model.metadata.get_input_schema().inputs if str(c.type) == "string"]
    frame = pd.read_csv(path, usecols=columns, dtype={c: str for c in strings}, keep_default_na=False, na_values=[""])
    frame = frame.astype(object).where(frame.notna(), None) if strings else frame
    scores = model.predict(frame)
    scores.to_csv(out, index_label="row")
    return len(scores)


def _ours(path: Path, settings, out: Path) -> int:
    from torchtfx.pipeline.cli.promotion import serving_target
    from torchtfx.pipeline.predict.run import PredictRequest, predict

    request = PredictRequest(
        data=str(path), out=str(out), dataset=settings.dataset, target=serving_target(settings), alias="champion"
    )
    return predict(request).rows


def predict_bench(root: Path, source_dir: Path, work: Path, scale_rows: int = SCALE_ROWS) -> dict:
    """Rows per second of ours, ``loop`` and ``pyfunc`` on ``COPIES`` x the taxi CSV, scored by ``root``'s champion
    (a taxi run of our pipeline); then ``torchtfx predict`` on ``scale_rows`` rows, measured as a command."""
    import mlflow

    from tests.bench import pipelines
    from torchtfx.components.shared.mlflow_client import resolve_tracking_uri
    from torchtfx.pipeline.cli.promotion import local_settings

    settings = local_settings("taxi", root, None)
    uri = resolve_tracking_uri(settings.mlflow_default_uri)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    path, rows = _input(source_dir, work)
    serving_dir = pipelines.only_subdir(root / "serving" / "taxi")
    ways = {
        "torchtfx_predict": lambda out: _ours(path, settings, out),
        "loop": lambda out: _loop(path, serving_dir, settings.dataset, out),
        "pyfunc": lambda out: _pyfunc(path, f"models:/{settings.registered_model_name}@champion", out),
    }
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    warmup: dict[str, float] = {}
    for round_ in range(ROUNDS + 1):
        for name, score in ways.items():
            out = work / f"scores_{name}_{round_}.csv"
            out.unlink(missing_ok=True)
            started = time.perf_counter()
            scored = score(out)
            elapsed = time.perf_counter() - started
            out.unlink()
            if scored != rows:
                raise RuntimeError(f"{name} scored {scored} of {rows} rows")
            if round_ == 0:
                warmup[name] = elapsed
            else:
                seconds[name].append(elapsed)
            logger.info("predict round %s %s: %.2f s", round_, name, elapsed)
    rate = {name: rows / statistics.median(times) for name, times in seconds.items()}
    ours = rate["torchtfx_predict"]
    return {
        "rows": rows,
        "warmup_seconds": warmup,
        "seconds": seconds,
        "rows_per_second": rate,
        "ratio_to": {name: ours / value for name, value in rate.items() if name != "torchtfx_predict"},
        "target_vs_loop": TARGET_VS_LOOP,
        "scale": _at_scale(root, source_dir, work, scale_rows),
    }


def _at_scale(root: Path, source_dir: Path, work: Path, rows: int) -> dict:
    """``torchtfx predict`` on ``rows`` rows as a command: wall time, rows/s, peak PSS and RSS of its tree."""
    from tests.bench.measure import require_success, run_measured

    path, rows = _input(source_dir, work, rows)
    out = work / f"scores_{rows}.csv"
    out.unlink(missing_ok=True)
    command = [str(Path(sys.executable).with_name("torchtfx")), "predict", "--dataset", "taxi"]
    command += ["--pipeline-root", str(root), "--data", str(path), "--out", str(out)]
    run = run_measured(command, work / f"predict_{rows}.log")
    require_success(run, "torchtfx predict at scale")
    with out.open() as written:
        lines = sum(1 for _ in written) - 1
    out.unlink()
    path.unlink()
    if lines != rows:
        raise RuntimeError(f"torchtfx predict wrote {lines} of {rows} rows")
    return {
        "rows": rows,
        "wall_seconds": run.wall_seconds,
        "rows_per_second": rows / run.wall_seconds,
        "peak_pss_gib": run.peak_pss_bytes / 2**30,
        "peak_rss_gib": run.peak_rss_gib,
        "peak_processes": len(run.peak_breakdown),
        "target_pss_gib": SCALE_PSS_TARGET_GIB,
    }
