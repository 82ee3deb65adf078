"""The synthetic taxi generator: same columns and cell types as the real CSV, zero anomalies against the
curated schema, a learnable but noisy label, reproducible from the seed, split into files correctly."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from torchtfx.data import synthetic_taxi

ROWS = 20_000
INT_TEXT = re.compile(r"-?\d+")


@pytest.fixture(scope="module")
def synthetic_csv(tmp_path_factory) -> Path:
    (path,) = synthetic_taxi.write_csv(tmp_path_factory.mktemp("synthetic_taxi"), ROWS, seed=7)
    return path


def _read_cells(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="") as handle:
        header, *rows = list(csv.reader(handle))
    return header, rows


def _column_kinds(path: Path) -> dict[str, str]:
    """int / float / string per column, inferred from the non-empty cells as CsvExampleGen does; 'empty' when
    the column has no value at all."""
    header, rows = _read_cells(path)
    kinds = {}
    for index, name in enumerate(header):
        cells = [row[index] for row in rows if row[index] != ""]
        if not cells:
            kinds[name] = "empty"
        elif all(INT_TEXT.fullmatch(c) for c in cells):
            kinds[name] = "int"
        else:
            try:
                [float(c) for c in cells]
                kinds[name] = "float"
            except ValueError:
                kinds[name] = "string"
    return kinds


def test_header_and_cell_types_match_the_real_csv(synthetic_csv, taxi_csv):
    assert _read_cells(synthetic_csv)[0] == _read_cells(taxi_csv)[0]
    real, fake = _column_kinds(taxi_csv), _column_kinds(synthetic_csv)
    real_missing = pd.read_csv(taxi_csv).isna().mean()
    for name, kind in fake.items():
        if kind == "empty":  # pickup_census_tract: one value in the 15k real rows, so often none in a sample
            assert real_missing[name] > 0.999, name
        else:
            assert kind == real[name], name


def test_same_seed_same_bytes_other_seed_other_rows(tmp_path):
    first = synthetic_taxi.write_csv(tmp_path / "a", 3000, seed=11)
    again = synthetic_taxi.write_csv(tmp_path / "b", 3000, seed=11)
    other = synthetic_taxi.write_csv(tmp_path / "c", 3000, seed=12)
    assert first[0].read_bytes() == again[0].read_bytes()
    assert first[0].read_bytes() != other[0].read_bytes()


def test_zero_anomalies_against_the_curated_schema(synthetic_csv, taxi_cfg):
    import tensorflow_data_validation as tfdv

    # As ExampleValidator does: default environment, no custom validation config.
    stats = tfdv.generate_statistics_from_csv(str(synthetic_csv))
    anomalies = tfdv.validate_statistics(stats, tfdv.load_schema_text(str(taxi_cfg.schema_path)))
    found = {name: info.short_description for name, info in anomalies.anomaly_info.items()}
    assert found == {}
    assert not anomalies.HasField("dataset_anomaly_info")


def _auc(frame: pd.DataFrame, columns: list[str]) -> float:
    """Held-out AUC of a plain logistic regression on one-hot categoricals and log-scaled numbers."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    categorical = [c for c in columns if frame[c].dtype == object or c.startswith("trip_start")]
    features = pd.get_dummies(frame[categorical].astype(str))
    for name in set(columns) - set(categorical):
        features[name] = np.log1p(frame[name].fillna(0).astype(float))
    label = frame["tips"] > 0.2 * frame["fare"]
    train = len(frame) * 2 // 3
    model = LogisticRegression(max_iter=500).fit(features[:train], label[:train])
    return roc_auc_score(label[train:], model.predict_proba(features[train:])[:, 1])


def test_label_is_learnable_but_noisy(synthetic_csv):
    frame = pd.read_csv(synthetic_csv, keep_default_na=False, na_values=[""])
    frame["busy_dropoff"] = frame["dropoff_community_area"].isin(synthetic_taxi.BUSY_AREAS).astype(float)
    full = _auc(frame, ["payment_type", "company", "trip_start_hour", "trip_start_day", "fare", "busy_dropoff"])
    payment_only = _auc(frame, ["payment_type"])
    assert 0.75 < full < 0.99
    assert full > payment_only + 0.01  # the other columns carry signal too, not only cash vs card


def test_files_split_at_rows_per_file_across_blocks(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(synthetic_taxi, "BLOCK_ROWS", 700)  # file boundaries fall inside blocks
    synthetic_taxi.main([str(tmp_path / "split"), "--rows", "2500", "--rows-per-file", "1000", "--seed", "3"])
    paths = [Path(line) for line in capsys.readouterr().out.split()]
    assert [p.name for p in paths] == ["part-00000.csv", "part-00001.csv", "part-00002.csv"]
    parts = [_read_cells(p) for p in paths]
    assert [len(rows) for _, rows in parts] == [1000, 1000, 500]
    (whole,) = synthetic_taxi.write_csv(tmp_path / "whole", 2500, seed=3, rows_per_file=2500)
    header, rows = _read_cells(whole)
    assert all(h == header for h, _ in parts)
    assert [row for _, part in parts for row in part] == rows  # the rows do not depend on the file split
    with pytest.raises(FileExistsError, match=r"part-00002\.csv"):
        synthetic_taxi.write_csv(tmp_path / "split", 1500, seed=3, rows_per_file=1000)


def test_no_nan_or_inf_and_empty_cells_only_where_the_real_data_has_them(synthetic_csv, taxi_csv):
    header, rows = _read_cells(synthetic_csv)
    bad = {"nan", "-nan", "inf", "-inf", "infinity", "-infinity", "<na>", "none", "null"}
    assert not [cell for row in rows for cell in row if cell.lower() in bad]
    real_header, real_rows = _read_cells(taxi_csv)
    ever_empty_in_real = {name for i, name in enumerate(real_header) if any(r[i] == "" for r in real_rows)}
    ever_empty = {name for i, name in enumerate(header) if any(r[i] == "" for r in rows)}
    assert ever_empty <= ever_empty_in_real
    assert {"fare", "tips", "trip_miles", "payment_type", "trip_start_timestamp"}.isdisjoint(ever_empty)
