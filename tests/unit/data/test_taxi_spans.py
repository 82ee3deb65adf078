"""The packaged taxi CSV cut into a span a month, arriving over several calls."""

from __future__ import annotations

import csv
import datetime

import pytest

from torchtfx.data.config.dataset import load_dataset_config
from torchtfx.data.taxi_spans import TIMESTAMP, main, taxi_rows, write_spans


def _rows(path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_each_month_is_a_span_named_for_its_first_day_and_new_months_arrive_beside_the_old(tmp_path):
    written = write_spans(tmp_path, "2013-02")
    assert [p.name for p in written] == ["2013-01-01", "2013-02-01"]
    for folder in written:
        months = {
            datetime.datetime.fromtimestamp(int(r[TIMESTAMP]), tz=datetime.timezone.utc).strftime("%Y-%m-01")
            for r in _rows(folder / "trips.csv")
        }
        assert months == {folder.name}
    before = (tmp_path / "2013-01-01" / "trips.csv").stat().st_mtime_ns

    assert [p.name for p in write_spans(tmp_path, "2013-03", cash_only=True)] == ["2013-03-01"]

    assert (tmp_path / "2013-01-01" / "trips.csv").stat().st_mtime_ns == before  # left as it was: stays stored
    assert {r["payment_type"] for r in _rows(tmp_path / "2013-03-01" / "trips.csv")} == {"Cash"}
    header, rows = taxi_rows()
    assert list(_rows(tmp_path / "2013-02-01" / "trips.csv")[0]) == header
    assert sum(len(_rows(p / "trips.csv")) for p in tmp_path.iterdir()) == sum(
        1 for r in rows if r[TIMESTAMP] and _month_of(r) <= "2013-03"
    )


def _month_of(row: dict[str, str]) -> str:
    return datetime.datetime.fromtimestamp(int(row[TIMESTAMP]), tz=datetime.timezone.utc).strftime("%Y-%m")


def test_a_through_that_is_not_a_month_is_refused_with_the_form(tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:
        main([str(tmp_path), "--through", "July"])
    assert refused.value.code == 2
    assert "--through 'July' is not a month: write it as YYYY-MM" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_the_shipped_dataset_reads_these_spans():
    cfg = load_dataset_config("taxi_spans")
    assert cfg.spans is not None and cfg.spans.pattern == "{YYYY}-{MM}-{DD}/*.csv" and cfg.spans.window == 7
    # The taxi dataset's features, label, split and slices; its data is the span root, not the packaged file.
    taxi = load_dataset_config("taxi").replace(name="taxi_spans", source_package=None, source_path=None)
    assert cfg.to_json() == taxi.to_json()
