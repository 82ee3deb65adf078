"""Synthetic Chicago taxi trips of any size, shaped like the CSV shipped in the tfx wheel (for scale runs).

The real sample has 15k rows; scale tests need millions that still pass ExampleValidator against
schema/taxi/schema.pbtxt and the DataGate's drift check against a champion trained on the real data. So the
header, column order and cell formats are the real CSV's, and categorical values are resampled with their real
frequencies: payment type, company (empty where the real feed leaves it empty), whole location tuples (community
areas, census tracts and coordinates of a real trip, so they agree with each other and keep their missing cells)
and trip dates. Distance drives trip seconds and the fare (Chicago's meter: $3.25 + $1.80/mile + $0.20/36 s).
Whether the rider tips more than 20% of the fare (the label) follows a fixed logistic model of payment type
(cash trips almost never record a tip), company, hour, weekend, fare and busy drop-off areas, drawn with noise:
learnable, but not perfectly.

Rows come in blocks of ``BLOCK_ROWS``; block i is drawn from seed ``(seed, i)``, so the data depends only on
``seed`` and ``rows`` (not on how it is cut into files) and memory is bounded by one block.
``python -m torchtfx.data.synthetic_taxi OUT_DIR --rows N [--seed S] [--rows-per-file K]`` writes
OUT_DIR/part-00000.csv, ...
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import math
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from torchtfx.data.config.dataset import load_dataset_config
from torchtfx.data.csv_reader.sources import csv_files, default_data_dir

logger = logging.getLogger(__name__)

BLOCK_ROWS = 250_000
# Resampled together from one real trip, so areas, tracts and coordinates stay consistent.
LOCATION_COLUMNS = (
    "pickup_community_area",
    "pickup_census_tract",
    "pickup_latitude",
    "pickup_longitude",
    "dropoff_community_area",
    "dropoff_census_tract",
    "dropoff_latitude",
    "dropoff_longitude",
)
# Integer columns with empty cells: read and written as pandas' nullable Int64, never as floats ("60.0" would
# make ExampleGen infer FLOAT where the schema says INT).
NULLABLE_INT_COLUMNS = (
    "pickup_community_area",
    "pickup_census_tract",
    "dropoff_community_area",
    "dropoff_census_tract",
    "trip_seconds",
)
# Label model (log-odds of tips > 20% of the fare): offsets per payment type; other types never tip.
PAYMENT_LOGIT = {"Credit Card": 0.8, "Unknown": -1.6, "Cash": -4.6}
OTHER_PAYMENT_LOGIT = -9.0
COMPANY_LOGIT_SPREAD = 1.2  # company offsets, fixed by a hash of the name, lie in +-0.6
BUSY_AREAS = (8, 32, 76)  # Near North Side, Loop, O'Hare: drop-offs there tip more
SECONDS_PER_DAY = 86_400


@dataclasses.dataclass(frozen=True)
class Empirical:
    """What the generator takes from the real CSV."""

    columns: tuple[str, ...]  # header, in order
    payment_types: np.ndarray
    payment_p: np.ndarray
    companies: np.ndarray  # "" = not reported
    company_p: np.ndarray
    locations: pd.DataFrame  # LOCATION_COLUMNS of every real trip
    days: np.ndarray  # UTC midnight (unix seconds) of every real trip
    hour_p: np.ndarray  # trip_start_hour frequencies, 0..23
    zero_miles: float  # share of trips whose meter recorded 0 miles
    zero_seconds: float
    missing_seconds: float


def _frequencies(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values (sorted, so the draw does not depend on hash order) and their shares."""
    counts = values.value_counts().sort_index()
    return counts.index.to_numpy(dtype=object), (counts / counts.sum()).to_numpy()


@functools.lru_cache(maxsize=1)
def empirical() -> Empirical:
    """Read the packaged taxi CSV once, on first use (not at import: the CSV lives in the tfx wheel)."""
    files = csv_files(default_data_dir(load_dataset_config("taxi")))
    dtypes = dict.fromkeys(NULLABLE_INT_COLUMNS, "Int64") | {"company": str, "payment_type": str}
    real = pd.concat(
        [pd.read_csv(f, dtype=dtypes, keep_default_na=False, na_values=[""]) for f in files],
        ignore_index=True,
    )
    real["company"] = real["company"].fillna("")
    payment_types, payment_p = _frequencies(real["payment_type"])
    companies, company_p = _frequencies(real["company"])
    hours = np.bincount(real["trip_start_hour"].to_numpy(), minlength=24)
    seconds = real["trip_seconds"]
    return Empirical(
        columns=tuple(real.columns),
        payment_types=payment_types,
        payment_p=payment_p,
        companies=companies,
        company_p=company_p,
        locations=real[list(LOCATION_COLUMNS)].reset_index(drop=True),
        days=real["trip_start_timestamp"].to_numpy(dtype=np.int64) // SECONDS_PER_DAY * SECONDS_PER_DAY,
        hour_p=hours / hours.sum(),
        zero_miles=float((real["trip_miles"] == 0).mean()),
        zero_seconds=float((seconds == 0).fillna(False).mean()),
        missing_seconds=float(seconds.isna().mean()),
    )


def _company_logit(companies: np.ndarray) -> np.ndarray:
    """A fixed offset per company from a stable hash of its name (Python's hash() changes per process)."""
    unit = np.array([zlib.crc32(name.encode()) % 1001 / 1000 for name in companies])
    return (unit - 0.5) * COMPANY_LOGIT_SPREAD


def _add_time(frame: pd.DataFrame, rng: np.random.Generator, emp: Empirical) -> None:
    """A real trip date, an hour from the real hourly profile, quarter-hour steps like the feed (UTC fields)."""
    rows = len(frame)
    hour = rng.choice(24, rows, p=emp.hour_p)
    start = emp.days[rng.integers(0, len(emp.days), rows)] + hour * 3600 + rng.integers(0, 4, rows) * 900
    frame["trip_start_timestamp"] = start
    frame["trip_start_hour"] = hour
    frame["trip_start_day"] = (start // SECONDS_PER_DAY + 4) % 7 + 1  # 1970-01-01 was a Thursday; 1 = Sunday
    frame["trip_start_month"] = start.astype("datetime64[s]").astype("datetime64[M]").astype(np.int64) % 12 + 1


def _add_trip(frame: pd.DataFrame, rng: np.random.Generator, emp: Empirical) -> None:
    """Distance -> seconds (slower at rush hour) -> metered fare; the recorded miles and seconds are noisy."""
    rows = len(frame)
    miles = np.clip(rng.lognormal(math.log(1.5), 1.0, rows), 0.1, 300.0)
    rush = np.isin(frame["trip_start_hour"].to_numpy(), (7, 8, 9, 16, 17, 18))
    seconds = miles * rng.lognormal(math.log(200), 0.35, rows) * np.where(rush, 1.3, 1.0) + rng.exponential(90, rows)
    seconds = np.minimum(np.round(seconds / 60) * 60, SECONDS_PER_DAY)
    fare = 3.25 + 1.80 * miles + 0.20 * seconds / 36 + rng.normal(0, 0.5, rows).clip(0)
    frame["fare"] = np.round(fare * 20) / 20
    recorded_miles = np.round(miles * rng.lognormal(0, 0.05, rows), 1)
    frame["trip_miles"] = np.where(rng.random(rows) < emp.zero_miles, 0.0, recorded_miles)
    draw = rng.random(rows)
    recorded_seconds = np.where(draw < emp.zero_seconds, 0, seconds).astype(np.int64)
    missing = draw > 1.0 - emp.missing_seconds
    frame["trip_seconds"] = pd.arrays.IntegerArray(recorded_seconds, missing)


def _add_tips(
    frame: pd.DataFrame, rng: np.random.Generator, emp: Empirical, pay: np.ndarray, company: np.ndarray
) -> None:
    """Big tipper or not from the fixed logistic model, then a tip amount on the right side of 20%."""
    rows = len(frame)
    payment_logit = np.array([PAYMENT_LOGIT.get(p, OTHER_PAYMENT_LOGIT) for p in emp.payment_types])
    hour = frame["trip_start_hour"].to_numpy()
    fare = frame["fare"].to_numpy()
    logit = (
        payment_logit[pay]
        + _company_logit(emp.companies)[company]
        + 0.5 * np.cos(2 * np.pi * (hour - 2) / 24)  # night riders tip more than midday ones
        + 0.3 * np.isin(frame["trip_start_day"].to_numpy(), (1, 7))
        - 0.6 * (np.log(fare) - 2.1)  # short trips: a round-dollar tip is a larger share
        + 0.4 * frame["dropoff_community_area"].isin(BUSY_AREAS).to_numpy(dtype=bool)
    )
    big = rng.random(rows) < 1 / (1 + np.exp(-logit))
    card = emp.payment_types[pay] == "Credit Card"
    small_share = np.where(card & (rng.random(rows) > 0.15), rng.uniform(0.05, 0.19, rows), 0.0)
    # Margins of at least 1% of the fare: the label survives float32 in the pipeline.
    big_tip = np.ceil(fare * (0.21 + rng.gamma(2.0, 0.03, rows)) * 100) / 100
    frame["tips"] = np.where(big, big_tip, np.floor(fare * small_share * 100) / 100)


def _block(rows: int, rng: np.random.Generator, emp: Empirical) -> pd.DataFrame:
    """``rows`` trips, fully vectorized, in the real CSV's column order."""
    pay = rng.choice(len(emp.payment_types), rows, p=emp.payment_p)
    company = rng.choice(len(emp.companies), rows, p=emp.company_p)
    frame = emp.locations.iloc[rng.integers(0, len(emp.locations), rows)].reset_index(drop=True)
    frame["payment_type"] = emp.payment_types[pay]
    frame["company"] = emp.companies[company]
    _add_time(frame, rng, emp)
    _add_trip(frame, rng, emp)
    _add_tips(frame, rng, emp, pay, company)
    if set(frame.columns) != set(emp.columns):
        raise RuntimeError(f"generated columns {sorted(frame.columns)} differ from the real {sorted(emp.columns)}")
    return frame[list(emp.columns)]


def iter_blocks(rows: int, seed: int = 7, block_rows: int | None = None) -> Iterator[pd.DataFrame]:
    """The data set as consecutive blocks of ``block_rows`` (default BLOCK_ROWS); block i uses seed (seed, i)."""
    block_rows = BLOCK_ROWS if block_rows is None else block_rows
    if rows < 1 or seed < 0 or block_rows < 1:
        raise ValueError(f"need rows >= 1, seed >= 0 and block_rows >= 1; got {rows}, {seed}, {block_rows}")
    emp = empirical()
    for index, start in enumerate(range(0, rows, block_rows)):
        yield _block(min(block_rows, rows - start), np.random.default_rng([seed, index]), emp)


def generate(rows: int, seed: int = 7) -> pd.DataFrame:
    """All rows in one DataFrame (small sizes; large ones go through :func:`write_csv`)."""
    return pd.concat(iter_blocks(rows, seed), ignore_index=True)


def write_csv(out_dir: Path, rows: int, seed: int = 7, rows_per_file: int = 1_000_000) -> list[Path]:
    """Write OUT_DIR/part-00000.csv, ... of at most ``rows_per_file`` rows each, every file with the header.

    Refuses a directory holding other CSV files: ExampleGen would read those too.
    """
    if rows < 1 or rows_per_file < 1:
        raise ValueError(f"rows and rows_per_file must be >= 1, got {rows} and {rows_per_file}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    planned = {f"part-{i:05d}.csv" for i in range(math.ceil(rows / rows_per_file))}
    strays = sorted(p.name for p in out_dir.glob("*.csv") if p.name not in planned)
    if strays:
        raise FileExistsError(f"{out_dir} already holds other CSV files ExampleGen would read too: {strays}")
    paths: list[Path] = []
    handle, left = None, 0
    try:
        for block in iter_blocks(rows, seed):
            while len(block):
                if left == 0:
                    if handle is not None:
                        handle.close()
                    paths.append(out_dir / f"part-{len(paths):05d}.csv")
                    handle, left = paths[-1].open("w", newline=""), rows_per_file
                piece, block = block.iloc[:left], block.iloc[left:]
                piece.to_csv(handle, header=left == rows_per_file, index=False, lineterminator="\n")
                left -= len(piece)
            logger.info("%s: %s rows so far", paths[-1], rows_per_file - left)
    finally:
        if handle is not None:
            handle.close()
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rows-per-file", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for path in write_csv(args.out_dir, args.rows, args.seed, args.rows_per_file):
        print(path)


if __name__ == "__main__":
    main()
