"""A multiclass label's num_classes checked against real TFDV statistics of a tiny CSV before Transform: more
classes than the label column's distinct values in the train split stop the DataGate, with the setting named."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow_data_validation as tfdv
from tfx.types import artifact_utils, standard_artifacts

from torchtfx.components.data_gate import drift, label_classes
from torchtfx.components.data_gate.constants import (
    ANOMALIES_FILE,
    ANOMALIES_KEY,
    LABEL_CLASSES_KEY,
    SCHEMA_HINT_KEY,
    STATISTICS_KEY,
)
from torchtfx.components.data_gate.executor import Executor
from torchtfx.components.data_gate.label_classes import LabelClasses, LabelClassesError
from torchtfx.components.stage_failure import StageFailure

CONFIG = "the dataset config 'flowers'"


def _statistics(tmp_path: Path, species: list[str], codes: list[int]):
    """TFDV's statistics of a CSV with a string label column (``species``, empty cells left empty) and an integer
    one (``code``)."""
    csv = tmp_path / "flowers.csv"
    rows = [f"{s},{c},{i * 0.5}" for i, (s, c) in enumerate(zip(species, codes, strict=True))]
    csv.write_text("species,code,petal\n" + "\n".join(rows) + "\n")
    return tfdv.generate_statistics_from_csv(str(csv))


@pytest.fixture(scope="module")
def three_species(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("three")
    return _statistics(tmp, ["setosa", "versicolor", "virginica", "setosa", ""] * 6, [0, 1, 2, 0, 1] * 6)


def test_more_classes_than_string_values_are_refused_naming_the_setting_the_values_and_the_fix(three_species):
    with pytest.raises(LabelClassesError) as err:
        label_classes.check(three_species, LabelClasses("species", 5, CONFIG))
    text = str(err.value)
    assert text.startswith(f"label.num_classes is 5 in {CONFIG}, but the label column 'species' has 3 distinct")
    assert "'setosa'" in text and "'virginica'" in text and "''" not in text  # an empty cell is a missing label
    assert "set label.num_classes to at most 3" in text and "Transform and training were not started" in text
    assert isinstance(err.value, StageFailure)  # the CLI prints it as the user's error, no "may be a bug"


def test_as_many_classes_as_values_pass(three_species):
    label_classes.check(three_species, LabelClasses("species", 3, CONFIG))
    label_classes.check(three_species, LabelClasses("species", 2, CONFIG))


def test_an_integer_label_is_bounded_by_its_range(three_species, tmp_path):
    with pytest.raises(LabelClassesError, match=r"integer values only from 0 to 2, so at most 3 distinct"):
        label_classes.check(three_species, LabelClasses("code", 4, CONFIG))
    label_classes.check(three_species, LabelClasses("code", 3, CONFIG))
    sparse = _statistics(tmp_path, ["a", "b"] * 5, [0, 7] * 5)  # two values, range 8: not provably too few
    label_classes.check(sparse, LabelClasses("code", 3, CONFIG))


def test_a_float_or_absent_column_is_left_to_the_trainer(three_species):
    label_classes.check(three_species, LabelClasses("petal", 50, CONFIG))
    label_classes.check(three_species, LabelClasses("nowhere", 50, CONFIG))


def _artifacts(tmp_path: Path, statistics) -> dict:
    anomalies = standard_artifacts.ExampleAnomalies()
    anomalies.uri = str(tmp_path / "anomalies")
    anomalies.split_names = artifact_utils.encode_split_names(["train"])
    (tmp_path / "anomalies" / "Split-train").mkdir(parents=True)
    clean = tfdv.validate_statistics(statistics, tfdv.infer_schema(statistics))
    (tmp_path / "anomalies" / "Split-train" / ANOMALIES_FILE).write_bytes(clean.SerializeToString())
    stats = standard_artifacts.ExampleStatistics()
    stats.uri = str(tmp_path / "statistics")
    (tmp_path / "statistics" / "Split-train").mkdir(parents=True)
    (tmp_path / "statistics" / "Split-train" / drift.STATS_FILE).write_bytes(statistics.SerializeToString())
    return {ANOMALIES_KEY: [anomalies], STATISTICS_KEY: [stats]}


def test_the_data_gate_executor_stops_before_transform(three_species, tmp_path):
    inputs = _artifacts(tmp_path, three_species)
    properties = {SCHEMA_HINT_KEY: "schema.pbtxt", LABEL_CLASSES_KEY: LabelClasses("species", 4, CONFIG).to_json()}
    with pytest.raises(LabelClassesError, match=r"label\.num_classes is 4"):
        Executor().Do(inputs, {}, properties)
    Executor().Do(inputs, {}, {**properties, LABEL_CLASSES_KEY: LabelClasses("species", 3, CONFIG).to_json()})
    Executor().Do(inputs, {}, {SCHEMA_HINT_KEY: "schema.pbtxt"})  # not a multiclass label: nothing to check
