"""The spans under a data root, against what TFX's ExampleGen driver (FileBasedDriver) resolves on the same
folders: the newest span, its newest version, the files' pattern and their fingerprint."""

from __future__ import annotations

from pathlib import Path

import pytest
from tfx.components.example_gen import driver
from tfx.proto import example_gen_pb2
from tfx.types import standard_component_specs
from tfx.utils import proto_utils

from torchtfx.data.spans.layout import SpanError, span_numbers, window


def _csv(folder: Path, rows: int = 1) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.csv").write_text("a,b\n" + "".join(f"{i},{i}\n" for i in range(rows)))


def _tfx_driver(root: Path, pattern: str) -> dict:
    """What TFX's driver puts into ExampleGen's execution properties for ``pattern`` under ``root``."""
    split = example_gen_pb2.Input.Split(name="single_split", pattern=pattern)
    properties = {
        standard_component_specs.INPUT_BASE_KEY: str(root),
        standard_component_specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(example_gen_pb2.Input(splits=[split])),
    }
    resolved = driver.FileBasedDriver(metadata_handle=None).resolve_exec_properties(properties, None, None)
    (split,) = proto_utils.json_to_proto(resolved["input_config"], example_gen_pb2.Input()).splits
    return {"span": resolved["span"], "version": resolved["version"], "pattern": split.pattern, **resolved}


@pytest.mark.parametrize(
    ("folders", "pattern"),
    [
        (["span-01/v1", "span-01/v2", "span-03/v1", "span-03/v4", "span-02/v9"], "span-{SPAN:2}/v{VERSION}/*.csv"),
        (["2026-11-30", "2026-12-01", "2026-12-03"], "{YYYY}-{MM}-{DD}/*.csv"),
        (["7", "8", "10"], "{SPAN}/*.csv"),
    ],
)
def test_the_newest_span_of_the_window_is_the_one_tfxs_driver_resolves(tmp_path, folders, pattern):
    for folder in folders:
        _csv(tmp_path / folder, rows=len(folder))
    tfx = _tfx_driver(tmp_path, pattern)

    newest = window(str(tmp_path), pattern, 7)[-1]

    assert (newest.number, newest.version, newest.pattern) == (tfx["span"], tfx["version"], tfx["pattern"])
    assert newest.fingerprint == tfx["input_fingerprint"].replace("split:single_split", "split:spans")


def test_each_span_is_read_at_its_newest_version_and_the_window_counts_spans_that_exist(tmp_path):
    for folder in ["span-1/v1", "span-1/v2", "span-2/v1", "span-5/v3", "span-5/v1", "span-9/v1"]:
        _csv(tmp_path / folder)
    pattern = "span-{SPAN}/v{VERSION}/*.csv"

    spans = window(str(tmp_path), pattern, 3)

    # Span 3, 4, 6, 7, 8 have no folder: the window of 3 reaches back past them, as TFX's rolling_range does.
    assert [(s.number, s.version, s.pattern) for s in spans] == [
        (2, 1, "span-2/v1/*.csv"),
        (5, 3, "span-5/v3/*.csv"),
        (9, 1, "span-9/v1/*.csv"),
    ]
    assert [s.number for s in window(str(tmp_path), pattern, 3, newest=5)] == [1, 2, 5]
    assert [s.label for s in window(str(tmp_path), pattern, 1)] == ["span 9 version 1"]


def test_date_spans_are_days_since_1970_and_named_by_their_date(tmp_path):
    _csv(tmp_path / "2026-12-01")
    (only,) = window(str(tmp_path), "{YYYY}-{MM}-{DD}/*.csv", 7)
    assert only.number == 20788
    assert only.label == "2026-12-01"


def test_a_folder_that_matches_the_pattern_but_names_no_span_is_named_with_the_fix(tmp_path):
    _csv(tmp_path / "span-1")
    _csv(tmp_path / "span-latest")
    with pytest.raises(SpanError, match=r"span-latest/data.csv matches the spans pattern .* move it out of"):
        span_numbers(str(tmp_path), "span-{SPAN}/*.csv")


def test_a_root_without_any_span_is_named_with_the_pattern(tmp_path):
    _csv(tmp_path)  # the CSV at the root, not in span folders
    with pytest.raises(SpanError, match=r"no file under .* matches the spans pattern 'span-\{SPAN\}/\*.csv'"):
        window(str(tmp_path), "span-{SPAN}/*.csv", 7)
    _csv(tmp_path / "span-4")
    with pytest.raises(SpanError, match="up to span 3"):
        window(str(tmp_path), "span-{SPAN}/*.csv", 7, newest=3)
