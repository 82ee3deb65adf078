"""Our CsvExampleGen executor on a tiny CSV, through a real (in-process) Beam pipeline."""

from __future__ import annotations

import tensorflow as tf
from tfx.components.util import examples_utils
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.utils import proto_utils

from torchtfx.components.csv_input.executor import Executor

ROWS = 200


def _run(tmp_path) -> standard_artifacts.Examples:
    data = tmp_path / "data"
    data.mkdir()
    lines = ["fare,company,tips"] + [f"{i * 0.5},c{i % 3},{i % 7}" for i in range(ROWS)]
    (data / "part.csv").write_text("\n".join(lines) + "\n")
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    splits = [example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=2),
              example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=1)]  # fmt: skip
    exec_properties = {
        standard_component_specs.INPUT_BASE_KEY: str(data),
        standard_component_specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(
            example_gen_pb2.Input(splits=[example_gen_pb2.Input.Split(name="single_split", pattern="*")])
        ),
        standard_component_specs.OUTPUT_CONFIG_KEY: proto_utils.proto_to_json(
            example_gen_pb2.Output(split_config=example_gen_pb2.SplitConfig(splits=splits))
        ),
        standard_component_specs.OUTPUT_DATA_FORMAT_KEY: example_gen_pb2.FORMAT_TF_EXAMPLE,
        standard_component_specs.OUTPUT_FILE_FORMAT_KEY: example_gen_pb2.FORMAT_TFRECORDS_GZIP,
    }
    executor = Executor(Executor.Context(beam_pipeline_args=["--direct_running_mode=in_memory"], tmp_dir=str(tmp_path)))
    executor.Do({}, {standard_component_specs.EXAMPLES_KEY: [examples]}, exec_properties)
    return examples


def _read(split_dir) -> list[tf.train.Example]:
    files = sorted(str(p) for p in split_dir.glob("*.gz"))
    return [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def test_every_row_lands_in_exactly_one_split_with_tfx_artifact_properties(tmp_path):
    examples = _run(tmp_path)

    train, eval_ = _read(tmp_path / "examples" / "Split-train"), _read(tmp_path / "examples" / "Split-eval")
    fares = sorted(e.features.feature["fare"].float_list.value[0] for e in train + eval_)
    assert fares == [i * 0.5 for i in range(ROWS)]
    assert 0.5 * ROWS < len(train) < 0.85 * ROWS  # 2:1 hash buckets
    assert {e.features.feature["company"].bytes_list.value[0] for e in train} == {b"c0", b"c1", b"c2"}
    # What Transform, StatisticsGen and the Evaluator read to pick their decoders.
    assert examples.split_names == '["train", "eval"]'
    assert examples_utils.get_payload_format(examples) == example_gen_pb2.FORMAT_TF_EXAMPLE
    assert examples_utils.get_file_format(examples) == "tfrecords_gzip"
