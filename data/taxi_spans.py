"""The taxi CSV shipped in the tfx wheel, cut into spans by ``trip_start_timestamp`` for data that arrives over time.

The packaged CSV holds 15,002 trips from January 2013 to December 2016, about ten a day: too few for a span a day,
so each month is one span, in a folder named for the month's first day (``2013-07-01/trips.csv``), which the
dataset ``taxi_spans`` reads with the pattern ``{YYYY}-{MM}-{DD}/*.csv`` (data/datasets/taxi_spans.yaml).

``python -m torchtfx.data.taxi_spans OUT --through 2013-07`` writes every month up to July 2013 into OUT; run it
again with a later month and the new months arrive beside the old ones (written files are left as they are, so
their spans stay in the span store). ``--cash-only`` writes the new months with every trip paid in cash: a
drifted span for the DataGate to refuse.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import itertools
from pathlib import Path

from torchtfx.data.csv_reader.sources import packaged_csv

TIMESTAMP = "trip_start_timestamp"
SPAN_FILE = "trips.csv"


def _month(row: dict[str, str]) -> str:
    started = datetime.datetime.fromtimestamp(int(row[TIMESTAMP]), tz=datetime.timezone.utc)
    return started.strftime("%Y-%m")


def taxi_rows() -> tuple[list[str], list[dict[str, str]]]:
    """The packaged CSV's header and rows, oldest trip first."""
    path = packaged_csv("tfx", "examples/chicago_taxi_pipeline/data/simple/data.csv")
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        rows = sorted(reader, key=lambda row: int(row[TIMESTAMP]))
        return list(reader.fieldnames or []), rows


def write_spans(out: Path, through: str, cash_only: bool = False) -> list[Path]:
    """Each month up to ``through`` (YYYY-MM) not yet under ``out`` as ``out/<YYYY-MM>-01/trips.csv``; returns
    the folders written."""
    datetime.datetime.strptime(through, "%Y-%m")  # a clear ValueError for anything else
    header, rows = taxi_rows()
    written = []
    for month, trips in itertools.groupby(rows, key=_month):
        folder = out / f"{month}-01"
        if month > through or folder.exists():
            continue
        folder.mkdir(parents=True)
        with (folder / SPAN_FILE).open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=header)
            writer.writeheader()
            writer.writerows({**trip, "payment_type": "Cash"} if cash_only else trip for trip in trips)
        written.append(folder)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the data root: a folder per span is written into it")
    parser.add_argument("--through", required=True, metavar="YYYY-MM", help="the last month to write (2013-01 on)")
    parser.add_argument("--cash-only", action="store_true", help="every new month's trips paid in cash (drift)")
    args = parser.parse_args(argv)
    try:
        written = write_spans(args.out, args.through, args.cash_only)
    except ValueError:
        parser.error(f"--through {args.through!r} is not a month: write it as YYYY-MM, e.g. 2013-07")
    print(f"{len(written)} span(s) written under {args.out}: {', '.join(p.name for p in written) or 'none new'}")


if __name__ == "__main__":
    main()
