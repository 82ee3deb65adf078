"""Our CsvExampleGen executor through a real (in-process) Beam pipeline: its output against TFX's own
CsvExampleGen on the clean taxi sample, and the files users really have (a byte-order mark and CRLF from Excel,
float columns whose values happen to be whole numbers) against the curated schema."""

from __future__ import annotations

import collections
import csv
import shutil
from pathlib import Path

import pytest
import tensorflow as tf
from tfx.components.example_gen.csv_example_gen import executor as tfx_csv_executor
from tfx.components.util import examples_utils
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.utils import proto_utils

from tests import helpers
from torchtfx.components.csv_input.component import schema_custom_config
from torchtfx.components.csv_input.executor import Executor
from torchtfx.data.config.dataset import MAX_CELL_CHARS
from torchtfx.data.config.missing import DEFAULT_MISSING_VALUES
from torchtfx.data.csv_reader.sources import DataSourceError

ROWS = 200
PENGUINS = Path(__file__).parents[2] / "data" / "samples" / "penguins.csv"  # an R export: NA for missing values
SCHEMA = """
feature { name: "fare" type: FLOAT }
feature { name: "company" type: BYTES }
feature { name: "tips" type: FLOAT }
feature { name: "trip_start_hour" type: INT }
"""


def _run(
    tmp_path,
    data,
    schema_file,
    executor_cls=Executor,
    name="examples",
    missing_values=DEFAULT_MISSING_VALUES,
    beam_args=("--direct_running_mode=in_memory",),
    max_cell_chars=MAX_CELL_CHARS,
    sample=1.0,
    partition_feature: str = "",
) -> standard_artifacts.Examples:
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / name)
    splits = [
        example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=2),
        example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=1),
    ]
    exec_properties = {
        standard_component_specs.INPUT_BASE_KEY: str(data),
        standard_component_specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(
            example_gen_pb2.Input(splits=[example_gen_pb2.Input.Split(name="single_split", pattern="*.csv")])
        ),
        standard_component_specs.OUTPUT_CONFIG_KEY: proto_utils.proto_to_json(
            example_gen_pb2.Output(
                split_config=example_gen_pb2.SplitConfig(
                    splits=splits, **({"partition_feature_name": partition_feature} if partition_feature else {})
                )
            )
        ),
        standard_component_specs.CUSTOM_CONFIG_KEY: proto_utils.proto_to_json(
            schema_custom_config(str(schema_file), missing_values, max_cell_chars, sample)
        ),
        standard_component_specs.OUTPUT_DATA_FORMAT_KEY: example_gen_pb2.FORMAT_TF_EXAMPLE,
        standard_component_specs.OUTPUT_FILE_FORMAT_KEY: example_gen_pb2.FORMAT_TFRECORDS_GZIP,
    }
    context = executor_cls.Context(beam_pipeline_args=list(beam_args), tmp_dir=str(tmp_path))
    executor_cls(context).Do({}, {standard_component_specs.EXAMPLES_KEY: [examples]}, exec_properties)
    return examples


def _read(split_dir) -> list[tf.train.Example]:
    files = sorted(str(p) for p in split_dir.glob("*.gz"))
    return [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def _splits(examples: standard_artifacts.Examples) -> dict[str, collections.Counter]:
    """Each split's examples as a multiset of their deterministic serialization (the order on disk is free)."""
    root = Path(examples.uri)
    return {
        split: collections.Counter(e.SerializeToString(deterministic=True) for e in _read(root / f"Split-{split}"))
        for split in ("train", "eval")
    }


@pytest.fixture
def small(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    lines = ["fare,company,tips,trip_start_hour"] + [f"{i * 0.5},c{i % 3},{i % 7 * 0.25},{i % 24}" for i in range(ROWS)]
    (data / "part.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "schema.pbtxt").write_text(SCHEMA)
    return data, tmp_path / "schema.pbtxt"


def test_every_row_lands_in_exactly_one_split_with_tfx_artifact_properties(tmp_path, small):
    examples = _run(tmp_path, *small)

    train, eval_ = _read(tmp_path / "examples" / "Split-train"), _read(tmp_path / "examples" / "Split-eval")
    fares = sorted(e.features.feature["fare"].float_list.value[0] for e in train + eval_)
    assert fares == [i * 0.5 for i in range(ROWS)]
    assert 0.5 * ROWS < len(train) < 0.85 * ROWS  # 2:1 hash buckets
    assert {e.features.feature["company"].bytes_list.value[0] for e in train} == {b"c0", b"c1", b"c2"}
    # What Transform, StatisticsGen and the Evaluator read to pick their decoders.
    assert examples.split_names == '["train", "eval"]'
    assert examples_utils.get_payload_format(examples) == example_gen_pb2.FORMAT_TF_EXAMPLE
    assert examples_utils.get_file_format(examples) == "tfrecords_gzip"


def test_output_is_tfx_csv_example_gens_on_the_clean_taxi_sample(tmp_path, taxi_cfg, taxi_csv):
    """Same examples (feature names, types, values, empty value lists for missing cells) in the same splits as
    TFX's own CsvExampleGen executor, so StatisticsGen, the DataGate and Transform see what they saw before."""
    ours = _run(tmp_path, taxi_csv.parent, taxi_cfg.schema_path)
    tfx = _run(tmp_path, taxi_csv.parent, taxi_cfg.schema_path, tfx_csv_executor.Executor, name="tfx")

    ours_splits, tfx_splits = _splits(ours), _splits(tfx)
    assert sum(ours_splits["train"].values()) + sum(ours_splits["eval"].values()) == len(helpers.csv_rows(taxi_csv))
    assert ours_splits == tfx_splits
    example = tf.train.Example.FromString(next(iter(ours_splits["eval"])))
    schema = {f.name: f.type for f in helpers.read_schema(taxi_cfg.schema_path).feature}
    kinds = {"int64_list": 2, "float_list": 3, "bytes_list": 1}  # schema_pb2.INT, FLOAT, BYTES
    assert {k: kinds[v.WhichOneof("kind")] for k, v in example.features.feature.items()} == schema


def test_a_split_by_a_features_value_is_tfx_csv_example_gens_too(tmp_path, taxi_cfg, taxi_csv):
    ours = _run(tmp_path, taxi_csv.parent, taxi_cfg.schema_path, partition_feature="company")
    tfx = _run(
        tmp_path, taxi_csv.parent, taxi_cfg.schema_path, tfx_csv_executor.Executor, "tfx", partition_feature="company"
    )

    assert _splits(ours) == _splits(tfx)


def test_two_beam_workers_read_one_file_in_parts_and_write_a_shard_each_of_the_same_examples(
    tmp_path, taxi_cfg, taxi_csv
):
    """One CSV file, two DirectRunner worker processes: each split gets one shard per worker (so StatisticsGen,
    Transform and the Evaluator read it on both), holding exactly the examples of a one-worker run."""
    two = ("--direct_running_mode=multi_processing", "--direct_num_workers=2")
    parallel = _run(tmp_path, taxi_csv.parent, taxi_cfg.schema_path, name="two", beam_args=two)
    single = _run(tmp_path, taxi_csv.parent, taxi_cfg.schema_path, name="one")

    for split in ("train", "eval"):
        shards = sorted((Path(parallel.uri) / f"Split-{split}").iterdir())
        assert len(shards) == 2, shards
        assert min(s.stat().st_size for s in shards) > 0.3 * max(s.stat().st_size for s in shards)
    assert _splits(parallel) == _splits(single)


def test_columns_without_any_value_are_written_untyped_as_tfx_does(tmp_path, taxi_cfg, taxi_csv):
    """TFX writes a column it saw no value in without a type, which the DataGate reports as "not present in
    any examples"; an empty value list would count as present and change that report."""
    rows = helpers.csv_rows(taxi_csv, 300)
    for row in rows:
        row["company"] = row["pickup_census_tract"] = row["fare"] = ""
    data = helpers.write_sample(rows, tmp_path / "data", list(rows[0]))

    ours = _splits(_run(tmp_path, data, taxi_cfg.schema_path))

    assert ours == _splits(_run(tmp_path, data, taxi_cfg.schema_path, tfx_csv_executor.Executor, name="tfx"))
    example = tf.train.Example.FromString(next(iter(ours["train"]))).features.feature
    assert example["fare"].WhichOneof("kind") is None and example["company"].WhichOneof("kind") is None


def _excel_csv(rows: list[dict[str, str]], fields: list[str], path: Path) -> None:
    """What Excel's "CSV UTF-8" writes: a byte-order mark, CRLF line ends, quotes where a value needs them."""
    with path.open("w", newline="", encoding="utf-8-sig") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, lineterminator="\r\n")
        writer.writeheader()
        writer.writerows(rows)


def test_excel_csv_with_byte_order_mark_and_crlf_gives_the_clean_files_examples(tmp_path, taxi_cfg, taxi_csv):
    rows = helpers.csv_rows(taxi_csv, 1000)
    rows[3]["company"] = "Line one\r\nline two, with a comma"  # a quoted value spanning lines survives too
    clean = helpers.write_sample(rows, tmp_path / "clean", list(rows[0]))
    excel = tmp_path / "excel"
    excel.mkdir()
    _excel_csv(rows, list(rows[0]), excel / "data.csv")
    assert (excel / "data.csv").read_bytes().startswith(b"\xef\xbb\xbfpickup_community_area,")

    from_excel = _splits(_run(tmp_path, excel, taxi_cfg.schema_path, name="from_excel"))

    assert from_excel == _splits(_run(tmp_path, clean, taxi_cfg.schema_path, name="from_clean"))
    names = {name for e in from_excel["train"] for name in tf.train.Example.FromString(e).features.feature}
    assert "pickup_community_area" in names and not any(name.startswith("\ufeff") for name in names)


def test_whole_numbers_in_float_columns_stay_floats_and_whole_floats_in_int_columns_are_ints(tmp_path, small):
    """The schema decides the type, not the values one file holds: every tip 0, whole-dollar fares (TFX inferred
    INT for both, a type anomaly), and an hour written as 7.0 (pandas does that to an int column with gaps)."""
    data, schema = small
    lines = ["fare,company,tips,trip_start_hour"] + [f"{i + 3},c{i % 3},0,{i % 24}.0" for i in range(ROWS)]
    lines[5] = "12,c1,,"  # missing values: empty lists of the column's type
    (data / "part.csv").write_text("\n".join(lines) + "\n")

    _run(tmp_path, data, schema)

    features = [
        e.features.feature for split in ("train", "eval") for e in _read(tmp_path / "examples" / f"Split-{split}")
    ]
    assert all(f["fare"].WhichOneof("kind") == "float_list" for f in features)
    assert all(f["tips"].WhichOneof("kind") == "float_list" for f in features)
    assert all(f["trip_start_hour"].WhichOneof("kind") == "int64_list" for f in features)
    assert {v for f in features for v in f["tips"].float_list.value} == {0.0}
    assert {v for f in features for v in f["trip_start_hour"].int64_list.value} <= set(range(24))
    assert len(features) == ROWS
    (gap,) = [f for f in features if f["company"].bytes_list.value == [b"c1"] and f["fare"].float_list.value == [12]]
    assert gap["tips"].WhichOneof("kind") == "float_list" and not gap["tips"].float_list.value
    assert gap["trip_start_hour"].WhichOneof("kind") == "int64_list" and not gap["trip_start_hour"].int64_list.value


def test_value_that_is_not_its_schema_type_names_file_line_column_and_value_before_beam(tmp_path, small):
    data, schema = small
    lines = (data / "part.csv").read_text().splitlines()
    lines[7] = "about three dollars,c1,0.5,3"
    lines[9] = "4.5,c1,0.5,3.5"  # not a whole hour
    lines[11] = "three,c1,0.5,3"
    (data / "part.csv").write_text("\n".join(lines) + "\n")

    with pytest.raises(DataSourceError) as err:
        _run(tmp_path, data, schema)

    path = data / "part.csv"
    assert str(err.value) == (
        "values that cannot be read as their column's type in the curated schema:\n"
        f"  - {path}, line 8, column 'fare': 'about three dollars' is not a number (FLOAT in the schema), "
        "and 1 more in this column\n"
        f"  - {path}, line 10, column 'trip_start_hour': '3.5' is not a whole number (INT in the schema)\n"
        "Fix the values (leave a cell empty for a missing value, or list the text that marks one under "
        "missing_values in the dataset config), or, if a column's type really changed, update the curated schema "
        f"({schema})."
    )
    assert not (tmp_path / "examples").exists()  # stopped before any Beam work


def test_duplicate_header_column_is_named_before_beam(tmp_path, small):
    data, schema = small
    lines = (data / "part.csv").read_text().splitlines()
    lines[0] = "fare,company,tips,fare"
    (data / "part.csv").write_text("\n".join(lines) + "\n")

    with pytest.raises(DataSourceError) as err:
        _run(tmp_path, data, schema)

    assert str(err.value) == (
        f"{data / 'part.csv'}: the header names column 'fare' twice (columns 1 and 4), so its values cannot be "
        "told apart; rename or remove one of them in the header"
    )
    assert not (tmp_path / "examples").exists()


def test_columns_the_schema_does_not_know_are_kept_as_text_and_missing_ones_are_absent(tmp_path, small):
    """As with TFX, for the DataGate to report: a new column ('surge', numeric or not) and a dropped one."""
    data, schema = small
    lines = ["fare,company,surge,trip_start_hour"] + [f"{i}.5,c{i % 3},1.5,{i % 24}" for i in range(ROWS)]
    (data / "part.csv").write_text("\n".join(lines) + "\n")

    _run(tmp_path, data, schema)

    example = _read(tmp_path / "examples" / "Split-train")[0].features.feature
    assert sorted(example) == ["company", "fare", "surge", "trip_start_hour"]
    assert example["surge"].bytes_list.value == [b"1.5"]


def test_header_name_that_differs_from_a_schema_column_only_invisibly_is_named_with_the_fix(tmp_path, small):
    data, schema = small
    lines = (data / "part.csv").read_text().splitlines()
    lines[0] = "fare,company,tips\u200b,trip_start_hour"  # a zero-width space pasted from a web page
    (data / "part.csv").write_text("\n".join(lines) + "\n")

    with pytest.raises(DataSourceError) as err:
        _run(tmp_path, data, schema)

    assert str(err.value) == (
        f"{data / 'part.csv'}: column 3 of the header is 'tips\\u200b', which the schema ({schema}) does not know; "
        "it has 'tips'. Rename the column to 'tips' in the header"
    )


def test_files_of_one_input_may_order_columns_differently_but_not_differ_in_them(tmp_path, small):
    data, schema = small
    (data / "reordered.csv").write_text("tips,trip_start_hour,company,fare\n0.25,3,c9,99.5\n")
    _run(tmp_path, data, schema)
    examples = _read(tmp_path / "examples" / "Split-train") + _read(tmp_path / "examples" / "Split-eval")
    assert len(examples) == ROWS + 1
    assert [e.features.feature["company"].bytes_list.value for e in examples].count([b"c9"]) == 1

    (data / "other.csv").write_text("fare,company,tips,surge\n1.5,c1,0.5,2\n")
    with pytest.raises(DataSourceError) as err:
        _run(tmp_path, data, schema, name="again")
    assert str(err.value) == (
        f"{data / 'part.csv'} and {data / 'other.csv'} have different columns ({data / 'part.csv'} has "
        "['trip_start_hour'] too and lacks ['surge']); every CSV file of one input needs the same columns, in any "
        "order: fix the header, or move the file elsewhere"
    )


def _features(tmp_path, name="examples") -> list:
    root = tmp_path / name
    return [e.features.feature for split in ("train", "eval") for e in _read(root / f"Split-{split}")]


def test_missing_value_markers_are_missing_in_numeric_columns_and_values_in_text_columns(tmp_path, small):
    """An R export writes NA for a missing number (and a spreadsheet #N/A, a database NULL): each is an empty value
    list, as an empty cell, in a FLOAT or INT column. In a text column NA stays a value (North America)."""
    data, schema = small
    lines = ["fare,company,tips,trip_start_hour"] + [f"{i}.5,c{i % 3},{i % 7}.25,{i % 24}" for i in range(ROWS)]
    lines[3] = "NA,NA,#N/A,NULL"
    lines[4] = "NaN,c1,1.0,NA"
    (data / "part.csv").write_text("\n".join(lines) + "\n")

    _run(tmp_path, data, schema)

    features = _features(tmp_path)
    (r_row,) = [f for f in features if f["company"].bytes_list.value == [b"NA"]]
    for column, kind in (("fare", "float_list"), ("tips", "float_list"), ("trip_start_hour", "int64_list")):
        assert r_row[column].WhichOneof("kind") == kind and not getattr(r_row[column], kind).value
    (nan_row,) = [f for f in features if f["tips"].float_list.value == [1.0]]
    assert not nan_row["fare"].float_list.value and not nan_row["trip_start_hour"].int64_list.value
    assert len(features) == ROWS


def test_a_numeric_column_of_markers_only_is_written_untyped_like_an_empty_one(tmp_path, small):
    data, schema = small
    lines = ["fare,company,tips,trip_start_hour"] + [f"{i}.5,c{i % 3},NA,{i % 24}" for i in range(ROWS)]
    (data / "part.csv").write_text("\n".join(lines) + "\n")

    _run(tmp_path, data, schema)

    assert all(f["tips"].WhichOneof("kind") is None for f in _features(tmp_path))


def test_without_markers_na_in_a_numeric_column_is_an_error_as_before(tmp_path, small):
    """missing_values: [] (or markers that do not include it): NA is a bad value, named with its line."""
    data, schema = small
    lines = (data / "part.csv").read_text().splitlines()
    lines[6] = "NA,c1,0.5,3"
    (data / "part.csv").write_text("\n".join(lines) + "\n")

    with pytest.raises(DataSourceError, match=r"line 7, column 'fare': 'NA' is not a number \(FLOAT in the schema\)"):
        _run(tmp_path, data, schema, missing_values=("NULL",))


def test_an_r_export_drafted_by_draft_schema_goes_through_example_gen(tmp_path):
    """The Palmer penguins as R writes them: the drafted schema types the NA columns as numbers, and ExampleGen
    reads those NA as missing (an empty value list) while sex keeps "NA" as a value."""
    from google.protobuf import text_format

    from torchtfx.data.schema_draft import draft_schema

    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(PENGUINS, data)
    schema = tmp_path / "schema.pbtxt"
    schema.write_text(text_format.MessageToString(draft_schema(data)))

    _run(tmp_path, data, schema)

    features = _features(tmp_path)
    assert len(features) == 344
    no_body_mass = [f for f in features if not f["body_mass_g"].int64_list.value]
    assert len(no_body_mass) == 2 and all(f["body_mass_g"].WhichOneof("kind") == "int64_list" for f in features)
    assert sum(f["sex"].bytes_list.value == [b"NA"] for f in features) == 11


def test_a_cell_longer_than_csvs_default_limit_is_written_when_the_dataset_s_max_cell_chars_allows_it(tmp_path, small):
    """The limit travels in the component's custom_config (only when it is not the default, so the compiled
    Kubeflow spec of a dataset that keeps it is unchanged) to the checks and to the Beam workers' reader."""
    data, schema = small
    long_value = "word " * 40_000  # 200,000 characters: past Python's own 131,072 and the limit set below
    lines = (data / "part.csv").read_text().splitlines()
    lines[4] = f'1.5,"{long_value}",0.25,3'
    (data / "part.csv").write_text("\n".join(lines) + "\n")
    assert "max_cell_chars" not in proto_utils.proto_to_json(schema_custom_config(str(schema)))

    with pytest.raises(DataSourceError, match=r"part.csv, line 5: a value longer than 131,072 .* raise max_cell_chars"):
        _run(tmp_path, data, schema, max_cell_chars=131_072)
    _run(tmp_path, data, schema, name="long", max_cell_chars=300_000)

    companies = [f["company"].bytes_list.value[0] for f in _features(tmp_path, "long")]
    assert len(companies) == ROWS and long_value.encode() in companies


def test_a_sample_keeps_the_same_fraction_of_rows_in_every_split_and_run(tmp_path, small):
    whole = _splits(_run(tmp_path, *small))
    first = _splits(_run(tmp_path, *small, name="first", sample=0.3))
    second = _splits(_run(tmp_path, *small, name="second", sample=0.3, beam_args=("--direct_num_workers=2",)))

    assert first == second  # the same rows, whatever the workers
    for split in ("train", "eval"):
        assert not first[split] - whole[split]  # each kept row in the split it lands in without a sample
        assert 0.18 < sum(first[split].values()) / sum(whole[split].values()) < 0.42, split
