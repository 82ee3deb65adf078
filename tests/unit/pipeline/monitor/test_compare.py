"""What moved, by TFDV's own comparators on statistics TFDV computed: a shifted numeric feature (Jensen-Shannon),
a new categorical value (L-infinity and the schema's domain), and an unshifted window that passes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import tensorflow_data_validation as tfdv
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from torchtfx.pipeline.monitor.compare import DRIFT, SCHEMA, SKEW, findings, uncompared

SCHEMA_TEXT = """
feature {
  name: "miles" type: FLOAT
  drift_comparator { jensen_shannon_divergence { threshold: 0.1 } }
}
feature {
  name: "payment" type: BYTES domain: "payment"
  drift_comparator { infinity_norm { threshold: 0.2 } }
}
feature { name: "hour" type: INT }
string_domain { name: "payment" value: "Cash" value: "Card" }
"""


def _statistics(seed: int, miles_scale: float = 1.0, new_payment: float = 0.0):
    rng = np.random.default_rng(seed)
    rows = 4000
    payment = np.where(rng.random(rows) < 0.6, "Cash", "Card").astype(object)
    payment[rng.random(rows) < new_payment] = "Crypto"
    frame = pd.DataFrame(
        {"miles": rng.gamma(2.0, 1.5, rows) * miles_scale, "payment": payment, "hour": rng.integers(0, 24, rows)}
    )
    return tfdv.generate_statistics_from_dataframe(frame)


@pytest.fixture(scope="module")
def schema():
    return text_format.Parse(SCHEMA_TEXT, schema_pb2.Schema())


@pytest.fixture(scope="module")
def training():
    return _statistics(seed=0)


def test_an_unshifted_window_passes(schema, training):
    assert findings(_statistics(seed=1), schema, training, previous=_statistics(seed=2)) == []


def test_a_shifted_numeric_feature_is_named_against_the_training_data(schema, training):
    found = findings(_statistics(seed=1, miles_scale=3.0), schema, training, previous=None)
    assert [(f.feature, f.against) for f in found] == [("miles", SKEW)]
    assert "Jensen-Shannon" in found[0].detail and "above the threshold 0.1" in found[0].detail


def test_a_new_categorical_value_is_named_against_the_schema_the_training_data_and_the_previous_window(
    schema, training
):
    found = findings(_statistics(seed=1, new_payment=0.4), schema, training, previous=_statistics(seed=2))
    assert sorted((f.feature, f.against) for f in found) == sorted(
        [("payment", DRIFT), ("payment", SCHEMA), ("payment", SKEW)]
    )
    assert any("Crypto" in f.detail for f in found if f.against == SCHEMA)


def test_a_shift_against_the_previous_window_alone_is_drift(schema, training):
    found = findings(_statistics(seed=1), schema, training, previous=_statistics(seed=2, miles_scale=3.0))
    assert [(f.feature, f.against) for f in found] == [("miles", DRIFT)]


def test_inputs_without_a_comparator_are_listed(schema):
    assert uncompared(schema) == ["hour"]
