"""Dataset config loading: the shipped configs load, and each kind of mistake is named."""

from __future__ import annotations

import json
import re

import pytest

from torchtfx.data.config.dataset import DatasetConfig, DatasetConfigError, load_dataset_config


def test_taxi_config_describes_features_label_split_and_slices(taxi_cfg):
    assert taxi_cfg.dense == ("trip_miles", "fare", "trip_seconds")
    assert "payment_type" in taxi_cfg.categorical and taxi_cfg.bucketized["pickup_latitude"] == 10
    assert taxi_cfg.label.relative_to == "fare" and taxi_cfg.label.threshold == pytest.approx(0.2)
    assert taxi_cfg.split == {"train": 2, "eval": 1}
    assert ("payment_type",) in taxi_cfg.slices
    assert taxi_cfg.schema_path.is_file()


def test_config_round_trips_through_json(taxi_cfg):
    assert DatasetConfig.from_json(taxi_cfg.to_json()) == taxi_cfg
    json.loads(taxi_cfg.to_json())  # must be plain JSON for TFX execution properties


def _write(tmp_path, text):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


BASE = """
name: bad
schema: {schema}
features: {{dense: [a], categorical: [b]}}
label: {{name: y, column: c, op: greater, threshold: 1}}
"""


@pytest.mark.parametrize(
    "patch, message",
    [
        ("label: {name: y, column: c, op: bigger}", "label op 'bigger'"),
        ("label: {name: y, column: a}", "label leak"),
        ("split: {train: 2}", "'split' must map exactly"),
        ("slices: [[nope]]", "unknown features ['nope']"),
        ("label: {name: y, column: c, op: in}", "non-empty 'positive_values'"),
    ],
)
def test_bad_configs_get_specific_errors(tmp_path, taxi_cfg, patch, message):
    text = BASE.format(schema=taxi_cfg.schema_path) + patch + "\n"
    with pytest.raises(DatasetConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_dataset_config(_write(tmp_path, text))


def test_unknown_dataset_lists_known_ones():
    with pytest.raises(DatasetConfigError, match=r"known datasets: .*taxi"):
        load_dataset_config("no_such_dataset")


def test_missing_schema_file_is_named(tmp_path):
    text = BASE.format(schema=tmp_path / "missing.pbtxt")
    with pytest.raises(DatasetConfigError, match=r"missing\.pbtxt does not exist"):
        load_dataset_config(_write(tmp_path, text))


@pytest.mark.parametrize(
    "text, message",
    [
        ("name: ../../escape\n", "name '../../escape' must be lowercase letters"),
        ("name: bad\nschema: ../../etc/passwd\n", "'schema' '../../etc/passwd' points outside"),
        (
            "name: bad\nsource: {package: tfx, path: ../../etc/passwd}\n",
            "'source.path' '../../etc/passwd' points outside",
        ),
        ("name: bad\nsource: {package: tfx, path: /etc/passwd}\n", "'source.path' must be relative"),
    ],
)
def test_security_config_paths_cannot_escape_their_root(tmp_path, text, message):
    """Relative paths in a dataset config are normalized and stay inside the project (or the package)."""
    with pytest.raises(DatasetConfigError, match=re.escape(message)):
        load_dataset_config(_write(tmp_path, text))


def test_embedded_feature_order_survives_the_json_round_trip():
    """Executors get the config as sorted-key JSON; a YAML-loaded config must order model columns alike."""
    cfg = load_dataset_config("taxi")
    assert cfg.embedded_features == DatasetConfig.from_json(cfg.to_json()).embedded_features


@pytest.mark.parametrize(
    "patch, message",
    [
        ("label: {name: y, column: c, missing: zero}", "label.missing 'zero' is not one of refuse, negative"),
        (
            "task: regression\nlabel: {name: y, column: c, missing: negative}",
            "label.missing does not apply to a regression task",
        ),
        ("missing_values: [NA, NULL]", "missing_values: holds a null: YAML reads an unquoted null"),
        ("missing_values: [NA, -999]", "missing_values: holds -999, a number"),
        ("missing_values: ['0']", "missing_values: holds '0', a number"),
        ("missing_values: NA", "missing_values: must be a list of strings"),
    ],
)
def test_missing_label_and_missing_value_settings_are_checked_by_name(tmp_path, taxi_cfg, patch, message):
    text = BASE.format(schema=taxi_cfg.schema_path)
    if patch.startswith(("label", "task")):
        text = text[: text.index("label:")]
    with pytest.raises(DatasetConfigError, match=re.escape(message)):
        load_dataset_config(_write(tmp_path, text + patch + "\n"))


def test_missing_values_default_to_the_common_markers_and_can_be_replaced(tmp_path, taxi_cfg):
    text = BASE.format(schema=taxi_cfg.schema_path)
    assert {"NA", "N/A", "#N/A", "NULL", "NaN"} <= set(load_dataset_config(_write(tmp_path, text)).missing_values)
    cfg = load_dataset_config(_write(tmp_path, text + "missing_values: ['', '-', 'NULL', 'NaN']\n"))
    assert cfg.missing_values == ("", "-", "NULL", "NaN")
    assert DatasetConfig.from_json(cfg.to_json()) == cfg


def test_a_binary_label_refuses_rows_only_where_the_schema_lets_a_label_column_be_missing(tmp_path, taxi_cfg):
    """taxi's tips and fare are required (a fixed shape): no row can lack them, so no weight column and the
    EvalConfig of before. A column the schema leaves optional (a census tract: no shape) can be missing."""
    assert taxi_cfg.optional_label_columns == () and taxi_cfg.label_weight_key is None
    text = BASE.format(schema=taxi_cfg.schema_path).replace("column: c,", "column: pickup_census_tract,")
    optional = load_dataset_config(_write(tmp_path, text))
    assert optional.optional_label_columns == ("pickup_census_tract",) and optional.label_weight_key == "y_weight_xf"
    negative = load_dataset_config(_write(tmp_path, text.replace("threshold: 1}", "threshold: 1, missing: negative}")))
    assert negative.label_weight_key is None


def test_max_cell_chars_is_read_within_its_bounds_and_kept_out_of_the_json_at_its_default(tmp_path, taxi_cfg):
    text = BASE.format(schema=taxi_cfg.schema_path)
    cfg = load_dataset_config(_write(tmp_path, text))
    assert cfg.max_cell_chars == 1_048_576 and "max_cell_chars" not in cfg.to_json()  # Transform's cache key
    raised = load_dataset_config(_write(tmp_path, text + "max_cell_chars: 4000000\n"))
    assert raised.max_cell_chars == 4_000_000 and DatasetConfig.from_json(raised.to_json()) == raised
    for bad in ("100", "2000000000", "many"):
        with pytest.raises(DatasetConfigError, match="max_cell_chars"):
            load_dataset_config(_write(tmp_path, text + f"max_cell_chars: {bad}\n"))


def test_sample_is_a_fraction_kept_out_of_the_json(tmp_path, taxi_cfg):
    text = BASE.format(schema=taxi_cfg.schema_path)
    assert load_dataset_config(_write(tmp_path, text)).sample == 1.0
    cfg = load_dataset_config(_write(tmp_path, text + "sample: 0.1\n"))
    assert cfg.sample == 0.1 and "sample" not in cfg.to_json()  # ExampleGen's alone: Transform's cache key
    for bad, says in (("0", "> 0"), ("1.5", "fraction of the rows"), (".nan", "finite"), ("some", "finite")):
        with pytest.raises(DatasetConfigError, match=f"sample.*{says}"):
            load_dataset_config(_write(tmp_path, text + f"sample: {bad}\n"))
