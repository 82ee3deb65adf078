"""The output appears at --out in one rename once every row is written, and a failed run leaves nothing."""

from __future__ import annotations

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
import pytest

from torchtfx.data.config.task import BINARY
from torchtfx.pipeline.predict.errors import PredictError
from torchtfx.pipeline.predict.outputs import OutputPlan, ScoredRows
from torchtfx.pipeline.predict.writer import SUCCESS_FILE, OutputTarget

PLAN = OutputPlan.from_probe((), BINARY, {"probabilities": np.zeros(1, np.float32)})
# Two elements of scored rows, as the scoring step yields them: lines 2-6 and 7-11 of one input file.
BATCHES = [
    ScoredRows("in.csv", lines, [()] * len(lines), {"probabilities": np.float32(np.array(lines) / 10)})
    for lines in ([2, 3, 4, 5, 6], [7, 8, 9, 10, 11])
]


def _write(target: OutputTarget) -> None:
    as_csv = target.fmt == "csv"
    with beam.Pipeline() as pipeline:
        _ = (
            pipeline
            | beam.Create(BATCHES)
            | beam.Map(lambda rows: PLAN.csv_text(rows) if as_csv else PLAN.table(rows))
            | target.sink(PLAN)
        )


def test_an_existing_out_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "scores.csv").write_text("keep me")
    with pytest.raises(PredictError, match="exists; nothing was scored or written"):
        OutputTarget.for_out(str(tmp_path / "scores.csv"), None)
    with pytest.raises(PredictError, match=r"is a \.csv file but --format is parquet"):
        OutputTarget.for_out(str(tmp_path / "new.csv"), "parquet")
    assert (tmp_path / "scores.csv").read_text() == "keep me"


def test_a_csv_file_out_is_one_file_with_a_header_and_every_row(tmp_path):
    target = OutputTarget.for_out(str(tmp_path / "out" / "scores.csv"), None)
    _write(target)
    assert not (tmp_path / "out" / "scores.csv").exists()  # staged until published
    assert target.publish(PLAN) == [str(tmp_path / "out" / "scores.csv")]
    lines = (tmp_path / "out" / "scores.csv").read_text().splitlines()
    assert lines[0] == "source_file,source_line,probabilities"
    assert sorted(lines[1:], key=lambda s: int(s.split(",")[1])) == [
        f"in.csv,{n},{np.float32(n / 10)!s}" for n in range(2, 12)
    ]
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["scores.csv"]  # no staging folder left


def test_a_folder_out_holds_parquet_shards_and_a_success_marker(tmp_path):
    target = OutputTarget.for_out(str(tmp_path / "scores"), "parquet")
    _write(target)
    written = target.publish(PLAN)
    assert written and all(p.endswith(".parquet") for p in written)
    assert (tmp_path / "scores" / SUCCESS_FILE).is_file()
    table = pq.read_table(str(tmp_path / "scores")).to_pandas().sort_values("source_line")
    assert table["source_line"].tolist() == list(range(2, 12))
    assert table["probabilities"].dtype == np.float32
    assert np.array_equal(table["probabilities"].to_numpy(), np.float32(np.arange(2, 12) / 10))
    assert [p.name for p in tmp_path.iterdir()] == ["scores"]


def test_discard_leaves_nothing_behind(tmp_path):
    target = OutputTarget.for_out(str(tmp_path / "scores.parquet"), None)
    _write(target)
    target.discard()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_a_single_file_out_is_the_shards_merged_with_one_header(tmp_path, suffix):
    """Written as shards (Beam's one-shard write would group every row in the launching process), merged at
    publish: every row of every shard, the CSV header once."""
    target = OutputTarget.for_out(str(tmp_path / f"scores.{suffix}"), None)
    staging = tmp_path / target.staging.rsplit("/", 1)[-1]
    staging.mkdir()
    for index, rows in enumerate(BATCHES):
        shard = staging / f"part-{index:05d}-of-00002.{suffix}"
        if suffix == "csv":
            shard.write_text(PLAN.csv_text(rows) + "\n")  # the text sink's shards: no header for a single file
        else:
            pq.write_table(PLAN.table(rows), str(shard))
    assert target.publish(PLAN) == [str(tmp_path / f"scores.{suffix}")]
    if suffix == "csv":
        lines = (tmp_path / "scores.csv").read_text().splitlines()
        assert lines[0] == PLAN.csv_header and PLAN.csv_header not in lines[1:]
        assert [int(line.split(",")[1]) for line in lines[1:]] == list(range(2, 12))
    else:
        table = pq.read_table(str(tmp_path / "scores.parquet"))
        assert table.column("source_line").to_pylist() == list(range(2, 12))
        assert table.schema == PLAN.arrow_schema()
    assert [p.name for p in tmp_path.iterdir()] == [f"scores.{suffix}"]  # the staging folder is gone
