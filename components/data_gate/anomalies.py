"""Read ExampleValidator's anomalies and say them in plain words."""

from __future__ import annotations

from pathlib import Path

from tensorflow_metadata.proto.v0 import anomalies_pb2

from torchtfx.components.data_gate.constants import ANOMALIES_FILE
from torchtfx.components.data_gate.drift import CHAMPION_DATA
from torchtfx.components.stage_failure import StageFailure


class DataValidationError(StageFailure):
    """The input data does not match the curated schema; training must not start."""


def read_anomalies(split_uri: str) -> anomalies_pb2.Anomalies:
    path = Path(split_uri) / ANOMALIES_FILE
    if not path.is_file():
        raise FileNotFoundError(f"ExampleValidator output {path} is missing")
    anomalies = anomalies_pb2.Anomalies()
    anomalies.ParseFromString(path.read_bytes())
    return anomalies


def describe(split: str, anomalies: anomalies_pb2.Anomalies) -> list[str]:
    """One line per anomaly: split, column, what is wrong."""
    lines = []
    for feature, info in sorted(anomalies.anomaly_info.items()):
        reasons = "; ".join(r.description for r in info.reason) or info.description
        short = info.short_description or "anomaly"
        # repr: a column name with an invisible character (a BOM, a zero-width space) shows it escaped
        lines.append(f"split '{split}', column {feature!r}: {short}: {reasons}")
    if anomalies.HasField("dataset_anomaly_info"):
        info = anomalies.dataset_anomaly_info
        reasons = "; ".join(r.description for r in info.reason) or info.description
        lines.append(f"split '{split}', whole dataset: {info.short_description or 'anomaly'}: {reasons}")
    return lines


def check(
    splits: dict[str, anomalies_pb2.Anomalies],
    schema_hint: str,
    drift: list[str] | None = None,
    baselines: tuple[str, ...] = (CHAMPION_DATA,),
) -> None:
    """Raise :class:`DataValidationError` listing every anomaly of every split and every drift (from
    ``baselines``), if any."""
    lines = [line for split, found in sorted(splits.items()) for line in describe(split, found)] + (drift or [])
    if lines:
        against = " and ".join(("the schema", *baselines)) if drift else "the schema"
        raise DataValidationError(
            f"data validation failed: {len(lines)} anomal{'y' if len(lines) == 1 else 'ies'} against {against}; "
            "training was not started and nothing was pushed.\n  - "
            + "\n  - ".join(lines)
            + f"\nFix the input data, or, if the change is intended, update the curated schema ({schema_hint})."
        )
