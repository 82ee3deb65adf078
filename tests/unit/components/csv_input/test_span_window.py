"""ExampleGen over a data root of spans: TFX's driver resolves the newest span; the executor reads the window's
older spans beside it, every row of them into the train split, and holds out the newest span's eval split alone."""

from __future__ import annotations

import collections
import os
from pathlib import Path

import pytest
import tensorflow as tf
from tfx.components.example_gen import driver
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.utils import proto_utils

from torchtfx.components.csv_input.component import schema_custom_config
from torchtfx.components.csv_input.constants import WINDOW_SPANS_PROPERTY
from torchtfx.components.csv_input.driver import SpanWindowDriver
from torchtfx.components.csv_input.executor import Executor
from torchtfx.data.config.spans import SpanConfig
from torchtfx.data.spans.layout import SpanError

SCHEMA = 'feature { name: "fare" type: FLOAT }\nfeature { name: "company" type: BYTES }\n'
PATTERN = "day-{SPAN}/*.csv"


def _span(root: Path, number: int, rows: int) -> None:
    folder = root / f"day-{number}"
    folder.mkdir(parents=True)
    lines = ["fare,company"] + [f"{number * 1000 + i},c{i % 3}" for i in range(rows)]
    (folder / "trips.csv").write_text("\n".join(lines) + "\n")


def _run(
    tmp_path: Path, root: Path, spans: SpanConfig | None, name: str, store: Path | None = None
) -> standard_artifacts.Examples:
    (tmp_path / "schema.pbtxt").write_text(SCHEMA)
    pattern = spans.pattern if spans else "*.csv"
    splits = [
        example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=2),
        example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=1),
    ]
    properties = {
        standard_component_specs.INPUT_BASE_KEY: str(root),
        standard_component_specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(
            example_gen_pb2.Input(splits=[example_gen_pb2.Input.Split(name="single_split", pattern=pattern)])
        ),
        standard_component_specs.OUTPUT_CONFIG_KEY: proto_utils.proto_to_json(
            example_gen_pb2.Output(split_config=example_gen_pb2.SplitConfig(splits=splits))
        ),
        standard_component_specs.CUSTOM_CONFIG_KEY: proto_utils.proto_to_json(
            schema_custom_config(str(tmp_path / "schema.pbtxt"), spans=spans, span_store=str(store or ""))
        ),
        standard_component_specs.OUTPUT_DATA_FORMAT_KEY: example_gen_pb2.FORMAT_TF_EXAMPLE,
        standard_component_specs.OUTPUT_FILE_FORMAT_KEY: example_gen_pb2.FORMAT_TFRECORDS_GZIP,
    }
    properties = driver.FileBasedDriver(metadata_handle=None).resolve_exec_properties(properties, None, None)
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / name)
    context = Executor.Context(beam_pipeline_args=["--direct_running_mode=in_memory"], tmp_dir=str(tmp_path))
    Executor(context).Do({}, {standard_component_specs.EXAMPLES_KEY: [examples]}, properties)
    return examples


def _split(examples: standard_artifacts.Examples, split: str) -> collections.Counter:
    files = sorted(str(p) for p in Path(examples.uri, f"Split-{split}").glob("*.gz"))
    return collections.Counter(r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP"))


def _fares(records: collections.Counter) -> list[float]:
    return sorted(tf.train.Example.FromString(r).features.feature["fare"].float_list.value[0] for r in records)


@pytest.fixture
def span_root(tmp_path):
    root = tmp_path / "spans"
    for number, rows in ((1, 30), (2, 40), (3, 90)):
        _span(root, number, rows)
    return root


def test_a_window_trains_on_every_row_of_its_older_spans_and_holds_out_the_newest_spans_eval_split(tmp_path, span_root):
    windowed = _run(tmp_path, span_root, SpanConfig(pattern=PATTERN, window=2), "windowed")
    # The newest span alone, read as a plain folder of CSV files: TFX's hash split of the same rows.
    newest = _run(tmp_path, span_root / "day-3", None, "newest")

    assert _split(windowed, "eval") == _split(newest, "eval")  # byte for byte
    older_train = _split(windowed, "train") - _split(newest, "train")
    assert _fares(older_train) == [2000 + i for i in range(40)]  # all of span 2; span 1 is outside the window
    assert _split(windowed, "train") == _split(newest, "train") + older_train
    assert windowed.get_string_custom_property(WINDOW_SPANS_PROPERTY) == "2,3"
    assert windowed.split_names == '["train", "eval"]'  # its span (3) is set by the driver, around the executor


def test_a_window_of_one_span_reads_the_newest_span_as_tfx_would(tmp_path, span_root):
    windowed = _run(tmp_path, span_root, SpanConfig(pattern=PATTERN, window=1), "one")
    newest = _run(tmp_path, span_root / "day-3", None, "newest")
    assert [_split(windowed, s) for s in ("train", "eval")] == [_split(newest, s) for s in ("train", "eval")]
    assert windowed.get_string_custom_property(WINDOW_SPANS_PROPERTY) == "3"


def test_a_bad_value_in_an_older_span_is_named_by_its_file_and_nothing_is_written(tmp_path, span_root):
    (span_root / "day-2" / "trips.csv").write_text("fare,company\n1.5,c1\nnot-a-number,c2\n")
    with pytest.raises(ValueError, match=r"day-2/trips.csv.*line 3"):
        _run(tmp_path, span_root, SpanConfig(pattern=PATTERN, window=3), "refused")
    assert not (tmp_path / "refused").exists()


def test_a_root_without_spans_is_refused_with_the_pattern(tmp_path):
    root = tmp_path / "flat"
    root.mkdir()
    (root / "trips.csv").write_text("fare,company\n1.0,c1\n")
    with pytest.raises((SpanError, ValueError), match=r"day-\{SPAN\}"):
        _run(tmp_path, root, SpanConfig(pattern=PATTERN, window=3), "none")


def _fingerprint(tmp_path: Path, root: Path, spans: SpanConfig) -> str:
    split = example_gen_pb2.Input.Split(name="single_split", pattern=spans.pattern)
    properties = {
        standard_component_specs.INPUT_BASE_KEY: str(root),
        standard_component_specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(example_gen_pb2.Input(splits=[split])),
        standard_component_specs.CUSTOM_CONFIG_KEY: proto_utils.proto_to_json(
            schema_custom_config(str(tmp_path / "schema.pbtxt"), spans=spans)
        ),
    }
    return SpanWindowDriver(metadata_handle=None).resolve_exec_properties(properties, None, None)["input_fingerprint"]


def test_the_cache_key_changes_when_an_older_span_of_the_window_changes_and_not_for_one_outside_it(tmp_path):
    root = tmp_path / "versions"
    for number in (1, 2, 3):
        (root / f"day-{number}" / "v1").mkdir(parents=True)
        (root / f"day-{number}" / "v1" / "trips.csv").write_text(f"fare,company\n{number},c\n")
    spans = SpanConfig(pattern="day-{SPAN}/v{VERSION}/*.csv", window=2)
    before = _fingerprint(tmp_path, root, spans)
    assert "span:2,version:1," in before and "span:1," not in before

    (root / "day-1" / "v2").mkdir()  # a new version of a span outside the window
    (root / "day-1" / "v2" / "trips.csv").write_text("fare,company\n10,c\n")
    assert _fingerprint(tmp_path, root, spans) == before
    (root / "day-2" / "v2").mkdir()  # a new version of the older span in the window
    (root / "day-2" / "v2" / "trips.csv").write_text("fare,company\n20,c\n")
    after = _fingerprint(tmp_path, root, spans)
    assert after != before and "span:2,version:2," in after
    # TFX's own fingerprint (the newest span's files) opens it, unchanged.
    assert after.split("\n")[0] == before.split("\n")[0]


def _rewrite_keeping_size_and_time(path: Path, text: str) -> None:
    """New content, same size and modification time: TFX's fingerprint of the file does not change."""
    stat = path.stat()
    assert len(text.encode()) == stat.st_size
    path.write_text(text)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_a_daily_run_reads_only_the_new_span_and_takes_the_others_from_the_store(tmp_path, span_root):
    store = tmp_path / "store"
    spans = SpanConfig(pattern=PATTERN, window=2)
    _run(tmp_path, span_root, spans, "day3", store)
    assert sorted(p.name.split("-")[1] for p in store.glob("span-*")) == ["2", "3"]
    # Span 3's file now says otherwise, but TFX's fingerprint of it is the same: a run that read it again would
    # write the new values.
    trips = span_root / "day-3" / "trips.csv"
    _rewrite_keeping_size_and_time(trips, trips.read_text().replace("3000,", "3999,"))
    _span(span_root, 4, 50)  # the next day arrives

    examples = _run(tmp_path, span_root, spans, "day4", store)

    train = _fares(_split(examples, "train"))
    assert 3000.0 in train and 3999.0 not in train  # span 3 from the store, not read again
    assert len([fare for fare in train if 3000 <= fare < 4000]) == 90  # every row of the older span trains
    assert not any(fare < 3000 for fare in train)  # span 2 left the window
    assert sorted(p.name.split("-")[1] for p in store.glob("span-*")) == ["3", "4"]  # and the store
    assert examples.get_string_custom_property(WINDOW_SPANS_PROPERTY) == "3,4"
    assert not list(store.glob(".writing-*"))


def test_a_span_whose_files_changed_is_read_again_and_its_old_entry_removed(tmp_path, span_root):
    store = tmp_path / "store"
    spans = SpanConfig(pattern=PATTERN, window=2)
    _run(tmp_path, span_root, spans, "first", store)
    (before,) = store.glob("span-2-*")
    trips = span_root / "day-2" / "trips.csv"
    trips.write_text(trips.read_text() + "2500,c9\n")  # a late row

    examples = _run(tmp_path, span_root, spans, "second", store)

    assert 2500.0 in _fares(_split(examples, "train"))
    (after,) = store.glob("span-2-*")
    assert after != before


def test_the_output_through_the_store_is_the_output_without_one(tmp_path, span_root):
    spans = SpanConfig(pattern=PATTERN, window=3)
    stored = _run(tmp_path, span_root, spans, "stored", tmp_path / "store")
    again = _run(tmp_path, span_root, spans, "again", tmp_path / "store")  # every span from the store
    alone = _run(tmp_path, span_root, spans, "alone")
    for split in ("train", "eval"):
        assert _split(stored, split) == _split(alone, split) == _split(again, split)
    # The store's files are linked, not copied.
    (linked,) = [p for p in Path(again.uri, "Split-eval").iterdir()]
    assert linked.stat().st_nlink >= 2


def test_a_bad_value_in_a_new_span_keeps_the_store_as_it_was(tmp_path, span_root):
    store = tmp_path / "store"
    spans = SpanConfig(pattern=PATTERN, window=2)
    _run(tmp_path, span_root, spans, "first", store)
    entries = sorted(p.name for p in store.iterdir())
    _span(span_root, 4, 10)
    (span_root / "day-4" / "trips.csv").write_text("fare,company\nnot-a-number,c2\n")
    with pytest.raises(ValueError, match=r"day-4/trips.csv.*line 2"):
        _run(tmp_path, span_root, spans, "refused", store)
    assert sorted(p.name for p in store.iterdir()) == entries
