"""ExampleGen's direct split writer (components/csv_input/split_writer.py): a part that fails leaves nothing a
reader of a split would take; input splits that are output splits as they are; TFX's hash partition of the
serialized bytes. Its output against TFX's own CsvExampleGen is in test_example_gen.py."""

from __future__ import annotations

import pytest
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.components.example_gen import base_example_gen_executor
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.utils import proto_utils

from tests.unit.components.csv_input.test_example_gen import ROWS, SCHEMA, _read
from torchtfx.components.csv_input.component import schema_custom_config
from torchtfx.components.csv_input.executor import Executor
from torchtfx.components.csv_input.split_writer import PartColumns, SplitTargets, WritePart, shard_path
from torchtfx.data.csv_reader.parts import CsvPart
from torchtfx.data.csv_reader.sources import DataSourceError

HEADER = "fare,company"


def test_a_part_that_fails_leaves_no_file_in_or_beside_the_split_folders(tmp_path):
    """The file changed after the checks (a fare that is not a number now): the part's error names the file and
    lines, and neither its split file nor its temporary file is left."""
    data = tmp_path / "part.csv"
    data.write_text(f"{HEADER}\n1.5,a\n2.5,b\nnot a fare,c\n")
    split = tmp_path / "examples" / "Split-train"
    split.mkdir(parents=True)
    part = CsvPart(str(data), len(HEADER) + 1, None, 2, tuple(HEADER.split(",")))
    columns = PartColumns({"fare": schema_pb2.FLOAT, "company": schema_pb2.BYTES}, frozenset(), ())

    with pytest.raises(DataSourceError, match=r"part\.csv, lines 2-4: column 'fare' holds a value that is not a"):
        list(WritePart(columns, SplitTargets((str(split),)), parts=1).process((0, part)))

    assert list((tmp_path / "examples").rglob("*")) == [split]


def test_a_part_writes_one_file_per_split_named_as_beams_shards(tmp_path):
    data = tmp_path / "part.csv"
    data.write_text(HEADER + "\n" + "".join(f"{i}.5,c{i}\n" for i in range(50)))
    splits = [tmp_path / "examples" / f"Split-{name}" for name in ("train", "eval")]
    for split in splits:
        split.mkdir(parents=True)
    part = CsvPart(str(data), len(HEADER) + 1, None, 2, tuple(HEADER.split(",")))
    columns = PartColumns({"fare": schema_pb2.FLOAT, "company": schema_pb2.BYTES}, frozenset(), ())
    targets = SplitTargets(tuple(str(split) for split in splits), (2, 3))

    counts = list(WritePart(columns, targets, parts=3).process((1, part)))

    files = [sorted(split.iterdir()) for split in splits]
    assert [[f.name for f in split_files] for split_files in files] == [["data_tfrecord-00001-of-00003.gz"]] * 2
    assert [str(f[0]) for f in files] == [shard_path(str(split), 1, 3) for split in splits]
    written = [_read(split) for split in splits]
    assert counts == [(str(split), len(examples)) for split, examples in zip(splits, written, strict=True)]
    assert sum(len(examples) for examples in written) == 50 and all(written)
    # Each example in the split TFX's own partition gives its serialized bytes.
    no_feature = example_gen_pb2.SplitConfig()
    for index, examples in enumerate(written):
        for example in examples:
            serialized = example.SerializeToString(deterministic=True)
            assert base_example_gen_executor._PartitionFn(serialized, 2, [2, 3], no_feature) == index


def test_input_splits_without_a_hash_split_are_written_as_the_output_splits(tmp_path):
    for name, first in (("train", 0), ("eval", 1000)):
        rows = "".join(f"{first + i}.5,c{i % 3},0.25,{i % 24}\n" for i in range(ROWS))
        (tmp_path / f"{name}-part.csv").write_text("fare,company,tips,trip_start_hour\n" + rows)
    (tmp_path / "schema.pbtxt").write_text(SCHEMA)
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    inputs = [example_gen_pb2.Input.Split(name=name, pattern=f"{name}-*.csv") for name in ("train", "eval")]
    exec_properties = {
        standard_component_specs.INPUT_BASE_KEY: str(tmp_path),
        standard_component_specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(example_gen_pb2.Input(splits=inputs)),
        standard_component_specs.OUTPUT_CONFIG_KEY: proto_utils.proto_to_json(example_gen_pb2.Output()),
        standard_component_specs.CUSTOM_CONFIG_KEY: proto_utils.proto_to_json(
            schema_custom_config(str(tmp_path / "schema.pbtxt"))
        ),
    }
    context = Executor.Context(beam_pipeline_args=["--direct_running_mode=in_memory"], tmp_dir=str(tmp_path))

    Executor(context).Do({}, {standard_component_specs.EXAMPLES_KEY: [examples]}, exec_properties)

    assert examples.split_names == '["train", "eval"]'
    for name, first in (("train", 0), ("eval", 1000)):
        written = _read(tmp_path / "examples" / f"Split-{name}")
        fares = sorted(example.features.feature["fare"].float_list.value[0] for example in written)
        assert fares == [first + i + 0.5 for i in range(ROWS)]
