"""The dataset YAML's spans: section, read strictly when the config is loaded (before any TFX import)."""

from __future__ import annotations

import pytest

from torchtfx.data.config.dataset import DatasetConfig, DatasetConfigError, load_dataset_config

BASE = """
name: spans
schema: {schema}
features: {{dense: [trip_miles], categorical: [company]}}
label: {{name: y, column: tips, op: greater, threshold: 1}}
"""


def _load(tmp_path, taxi_cfg, spans: str = "") -> DatasetConfig:
    path = tmp_path / "spans.yaml"
    path.write_text(BASE.format(schema=taxi_cfg.schema_path) + spans)
    return load_dataset_config(path)


def test_a_dataset_without_spans_reads_its_root_as_one_input(tmp_path, taxi_cfg):
    assert _load(tmp_path, taxi_cfg).spans is None


def test_spans_take_a_tfx_pattern_and_a_window_of_7_by_default_kept_out_of_the_json(tmp_path, taxi_cfg):
    cfg = _load(tmp_path, taxi_cfg, "spans: {pattern: '{YYYY}-{MM}-{DD}/*.csv'}\n")
    assert (cfg.spans.pattern, cfg.spans.window) == ("{YYYY}-{MM}-{DD}/*.csv", 7)
    # ExampleGen's alone: the JSON the other components get (Transform's cache key among them) is unchanged.
    assert cfg.to_json() == _load(tmp_path, taxi_cfg).to_json()
    assert cfg.replace(sample=0.5).spans == cfg.spans


@pytest.mark.parametrize(
    ("spans", "named"),
    [
        ("spans: {pattern: '*.csv'}", "spans.pattern.*has no {SPAN}"),
        ("spans: {pattern: '../x/{SPAN}/*.csv'}", "spans.pattern.*stay inside it"),
        ("spans: {pattern: '{SPAN}/{VERSION}/{VERSION}/*.csv'}", "more than one {VERSION}"),
        ("spans: {pattern: '{SPAN}/*.csv', window: 0}", "spans.window.*from 1 to 366"),
        ("spans: {pattern: '{SPAN}/*.csv', window: 1000}", "spans.window.*from 1 to 366"),
        ("spans: {pattern: '{SPAN}/*.csv', windw: 3}", "unknown key spans.windw"),
        ("spans: {window: 3}", "spans.pattern"),
    ],
)
def test_a_bad_spans_section_is_named_by_key_with_the_fix(tmp_path, taxi_cfg, spans, named):
    with pytest.raises(DatasetConfigError, match=named.replace("{", r"\{").replace("}", r"\}")):
        _load(tmp_path, taxi_cfg, spans + "\n")
