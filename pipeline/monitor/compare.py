"""What moved: by the curated schema's comparators (``drift_comparator``: L-infinity for a categorical column,
Jensen-Shannon for a numeric one), the requests against the champion's training data (skew) and against the
previous monitoring window (drift); and the schema's own checks on the requests (a value outside a column's
domain, a missing input)."""

from __future__ import annotations

import dataclasses

from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

SKEW = "the champion's training data"
DRIFT = "the previous monitoring window"
SCHEMA = "the schema"


@dataclasses.dataclass(frozen=True)
class Finding:
    feature: str
    against: str  # SKEW, DRIFT or SCHEMA
    detail: str

    def line(self) -> str:
        return f"column '{self.feature}' against {self.against}: {self.detail}"


def findings(
    served: statistics_pb2.DatasetFeatureStatisticsList,
    schema: schema_pb2.Schema,
    training: statistics_pb2.DatasetFeatureStatisticsList,
    previous: statistics_pb2.DatasetFeatureStatisticsList | None,
) -> list[Finding]:
    """Every feature that moved against the training data or the previous window, and every schema anomaly of
    the requests; [] when nothing did."""
    import tensorflow_data_validation as tfdv

    from torchtfx.components.data_gate.public import DRIFT_TYPES

    found = []
    against_training = tfdv.validate_statistics(served, schema, previous_statistics=training)
    for feature, info in sorted(against_training.anomaly_info.items()):
        for reason in info.reason:
            found.append(Finding(feature, SKEW if reason.type in DRIFT_TYPES else SCHEMA, reason.description))
    if previous is not None:
        against_previous = tfdv.validate_statistics(served, schema, previous_statistics=previous)
        for feature, info in sorted(against_previous.anomaly_info.items()):
            found += [Finding(feature, DRIFT, r.description) for r in info.reason if r.type in DRIFT_TYPES]
    return found


def uncompared(schema: schema_pb2.Schema) -> list[str]:
    """The served inputs the schema gives no comparator: their distribution is not checked (their values still are,
    by the schema's domains and ranges). Add a ``drift_comparator`` to a feature to compare it."""
    return sorted(f.name for f in schema.feature if not f.HasField("drift_comparator"))
