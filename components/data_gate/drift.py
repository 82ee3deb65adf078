"""Drift between the new data and the data the champion was trained on, by the comparators in the curated
schema (``drift_comparator``: L-infinity for categorical features, Jensen-Shannon for numeric ones)."""

from __future__ import annotations

import os

from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2

STATS_FILE = "FeatureStats.pb"
DRIFT_SPLIT = "train"  # the split a model learns from
DRIFT_TYPES = (  # the comparators' anomalies: drift (and, against training data from serving, skew)
    anomalies_pb2.AnomalyInfo.COMPARATOR_L_INFTY_HIGH,
    anomalies_pb2.AnomalyInfo.COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH,
)


def load_split_statistics(statistics_uri: str, split: str = DRIFT_SPLIT):
    import tensorflow_data_validation as tfdv

    return tfdv.load_stats_binary(os.path.join(statistics_uri, f"Split-{split}", STATS_FILE))


CHAMPION_DATA = "the champion's training data"
WINDOW_DATA = "the window's spans (the train split)"


def drift_lines(
    current_uri: str,
    baseline_uri: str,
    schema: schema_pb2.Schema,
    current_split: str = DRIFT_SPLIT,
    baseline_split: str = DRIFT_SPLIT,
    baseline: str = CHAMPION_DATA,
) -> list[str]:
    """One line per feature whose distribution in ``current_split`` moved beyond its schema threshold from
    ``baseline_split`` of the baseline statistics (named ``baseline`` in the lines), else []."""
    import tensorflow_data_validation as tfdv

    found = tfdv.validate_statistics(
        load_split_statistics(current_uri, current_split),
        schema,
        previous_statistics=load_split_statistics(baseline_uri, baseline_split),
    )
    lines = []
    for feature, info in sorted(found.anomaly_info.items()):
        reasons = [r.description for r in info.reason if r.type in DRIFT_TYPES]
        if reasons:
            lines.append(f"split '{current_split}', column '{feature}': drift from {baseline}: " + "; ".join(reasons))
    return lines
