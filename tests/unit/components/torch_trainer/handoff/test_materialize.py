"""The Trainer's materialize step: TFRecords of tf.Examples -> .npy columns, streamed chunk by chunk. Most tests
feed it already-transformed examples (a plain parse as the feature function) to place a bad value exactly; the last
ones run ExampleGen-style raw examples through a real saved TFT graph, against TFT's own Beam transform."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from torchtfx.components.torch_trainer.handoff import materialize
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit, id_dtype
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout

LAYOUT = FeatureLayout(dense=("a_xf", "b_xf"), embedded=("c_xf",), cardinalities=(5,), label="y")
SPEC = {
    "a_xf": tf.io.FixedLenFeature([], tf.float32),
    "b_xf": tf.io.FixedLenFeature([], tf.float32),
    "c_xf": tf.io.FixedLenFeature([], tf.int64),
    "y": tf.io.FixedLenFeature([], tf.int64),
}


def _parse(spec: dict) -> materialize.FeatureFn:
    return lambda batch: tf.io.parse_example(batch, spec)


PARSE = _parse(SPEC)


def _write_examples(split_dir, rows: list[tuple[float, float, int, int]], files: int = 2) -> None:
    split_dir.mkdir(parents=True)
    for part in range(files):
        options = tf.io.TFRecordOptions(compression_type="GZIP")
        with tf.io.TFRecordWriter(str(split_dir / f"data-{part}.gz"), options) as writer:
            for a, b, c, y in rows[part::files]:
                feature = {
                    "a_xf": tf.train.Feature(float_list=tf.train.FloatList(value=[a])),
                    "b_xf": tf.train.Feature(float_list=tf.train.FloatList(value=[b])),
                    "c_xf": tf.train.Feature(int64_list=tf.train.Int64List(value=[c])),
                    "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[y])),
                }
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def _rows(n: int) -> list[tuple[float, float, int, int]]:
    return [(i * 0.5, -float(i), i % 5, i % 2) for i in range(n)]


def test_split_streams_in_chunks_into_loadable_arrays(tmp_path, monkeypatch):
    monkeypatch.setattr(materialize, "_PARSE_BATCH", 7)  # many chunks, the last one partial
    rows = _rows(50)
    _write_examples(tmp_path / "Split-train", rows)

    counts = materialize.materialize({"train": str(tmp_path / "Split-train")}, LAYOUT, PARSE, tmp_path / "arrays")

    assert counts.rows == {"train": 50} and counts.refused == {"train": 0}
    split = ArraySplit.load(tmp_path / "arrays" / "train")
    assert split.dense.dtype == np.float32 and split.dense.shape == (50, 2)
    assert split.categorical.dtype == np.int8 and split.categorical.shape == (50, 1)  # a vocabulary of 5 ids
    # Files are read in name order; within each, rows keep their order.
    expected = rows[0::2] + rows[1::2]
    np.testing.assert_array_equal(split.dense, np.array([(a, b) for a, b, _, _ in expected], np.float32))
    np.testing.assert_array_equal(split.categorical[:, 0], [c for _, _, c, _ in expected])
    np.testing.assert_array_equal(split.label, [y for *_, y in expected])
    assert not list((tmp_path / "arrays" / "train").glob("*.raw"))


@pytest.mark.parametrize(
    ("sizes", "dtype"),
    [
        ((5,), np.int8),
        ((128,), np.int8),
        ((129,), np.int16),
        ((5, 40_000), np.int32),
        ((2**31,), np.int32),
        ((2**31 + 1,), np.int64),
        ((), np.int64),
    ],
)
def test_ids_are_stored_in_the_narrowest_type_that_holds_the_largest_vocabulary(sizes, dtype):
    assert id_dtype(sizes) == np.dtype(dtype)


def test_narrowed_ids_reach_the_model_as_int64_with_their_values(tmp_path):
    """An id past int8 (200 of 300) is stored as int16 and widened per batch unchanged; the worker's shard keeps
    the narrow type (the memory this saves is the point)."""
    layout = dataclasses.replace(LAYOUT, cardinalities=(300,))
    rows = [(0.0, 0.0, c, 1) for c in (0, 127, 128, 200, 299)]
    _write_examples(tmp_path / "Split-train", rows, files=1)

    materialize.materialize({"train": str(tmp_path / "Split-train")}, layout, PARSE, tmp_path / "arrays")

    split = ArraySplit.load(tmp_path / "arrays" / "train")
    assert split.categorical.dtype == np.int16 and split.shard(0, 1, equal=True).categorical.dtype == np.int16
    _, categorical = split.model_inputs()
    assert categorical.dtype == np.int64 and categorical[:, 0].tolist() == [0, 127, 128, 200, 299]


def test_an_id_outside_the_vocabulary_is_named_before_it_could_wrap_in_the_narrow_type(tmp_path):
    """300 in a 5-id vocabulary would be 44 in int8: the check runs on the parsed int64 ids."""
    rows = _rows(6)
    rows[3] = (0.0, 0.0, 300, 1)
    _write_examples(tmp_path / "Split-train", rows)
    with pytest.raises(ValueError, match=r"c_xf has ids in \[0, 300\].*vocabulary has 5 entries"):
        materialize.materialize({"train": str(tmp_path / "Split-train")}, LAYOUT, PARSE, tmp_path / "arrays")


def test_an_id_outside_the_vocabulary_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(materialize, "_PARSE_BATCH", 4)
    rows = _rows(12)
    rows[9] = (0.0, 0.0, 7, 1)  # the vocabulary has 5 entries
    _write_examples(tmp_path / "Split-eval", rows, files=1)

    with pytest.raises(ValueError, match=r"feature c_xf has ids in \[\d, 7\] \(rows from 8\).*5 entries"):
        materialize.write_split(str(tmp_path / "Split-eval"), LAYOUT, PARSE, tmp_path / "out")


def test_non_finite_dense_values_are_refused(tmp_path):
    rows = _rows(6)
    rows[3] = (float("nan"), 0.0, 1, 0)
    _write_examples(tmp_path / "Split-train", rows, files=1)

    with pytest.raises(ValueError, match="NaN or inf"):
        materialize.write_split(str(tmp_path / "Split-train"), LAYOUT, PARSE, tmp_path / "out")


def test_an_empty_split_is_an_error_and_leaves_no_files(tmp_path):
    _write_examples(tmp_path / "Split-eval", [], files=1)

    with pytest.raises(ValueError, match="holds no examples"):
        materialize.write_split(str(tmp_path / "Split-eval"), LAYOUT, PARSE, tmp_path / "out")
    assert not list((tmp_path / "out").iterdir())


def _write_weighted(split_dir, labels: list[int], weights: list[float]) -> None:
    split_dir.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(split_dir / "data-0.gz"), tf.io.TFRecordOptions(compression_type="GZIP")) as w:
        for i, (y, weight) in enumerate(zip(labels, weights, strict=True)):
            feature = {
                "a_xf": tf.train.Feature(float_list=tf.train.FloatList(value=[float(i)])),
                "b_xf": tf.train.Feature(float_list=tf.train.FloatList(value=[0.0])),
                "c_xf": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 5])),
                "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[y])),
                "y_weight": tf.train.Feature(float_list=tf.train.FloatList(value=[weight])),
            }
            w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


WEIGHTED = FeatureLayout(("a_xf", "b_xf"), ("c_xf",), (5,), "y", "multiclass", ("a", "b", "c"), "y_weight")
WEIGHTED_PARSE = _parse({**SPEC, "y_weight": tf.io.FixedLenFeature([], tf.float32)})


def test_rows_with_a_refused_label_are_left_out_and_counted(tmp_path, caplog):
    _write_weighted(tmp_path / "Split-train", [0, 2, 0, 1, 0], [1.0, 1.0, 0.0, 1.0, 0.0])

    rows = materialize.write_split(str(tmp_path / "Split-train"), WEIGHTED, WEIGHTED_PARSE, tmp_path / "out")

    assert rows == materialize.SplitRows(rows=3, refused=2)
    split = ArraySplit.load(tmp_path / "out")
    np.testing.assert_array_equal(split.label, [0, 2, 1])
    np.testing.assert_array_equal(split.dense[:, 0], [0.0, 1.0, 3.0])
    assert "2 of 5 rows refused for their label (a missing label, or a value that is not one of the classes)" in (
        caplog.text
    )


def test_a_binary_split_counts_its_refused_rows_per_split(tmp_path):
    """A binary label with a weight (a label column the schema lets be missing): refused rows are left out and
    counted per split, for the run's summary."""
    binary = dataclasses.replace(WEIGHTED, task="binary", classes=())
    _write_weighted(tmp_path / "Split-train", [0, 1, 0, 1], [1.0, 1.0, 0.0, 1.0])
    _write_weighted(tmp_path / "Split-eval", [0, 0, 1], [0.0, 0.0, 1.0])
    splits = {split: str(tmp_path / f"Split-{split}") for split in ("train", "eval")}

    counts = materialize.materialize(splits, binary, WEIGHTED_PARSE, tmp_path / "arrays")

    assert counts.rows == {"train": 3, "eval": 1} and counts.refused == {"train": 1, "eval": 2}
    np.testing.assert_array_equal(ArraySplit.load(tmp_path / "arrays" / "eval").label, [1])


def test_a_split_whose_labels_are_all_refused_is_named(tmp_path):
    _write_weighted(tmp_path / "Split-eval", [0, 0], [0.0, 0.0])
    with pytest.raises(ValueError, match="holds no examples with a usable label \\(2 refused\\)"):
        materialize.write_split(str(tmp_path / "Split-eval"), WEIGHTED, WEIGHTED_PARSE, tmp_path / "out")


def _beam_materialized(tiny, out_dir) -> str:
    """What Transform's Beam job wrote before the Trainer read raw examples: TFT's ``TransformDataset`` over the
    raw examples with the saved graph, encoded as tf.Examples into gzipped TFRecords (TFX's Transform executor)."""
    import apache_beam as beam
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tfx_bsl.public import tfxio

    from tests import helpers

    graph_dir = str(Path(tiny.tft_output.transform_savedmodel_dir).parent)
    source = tfxio.TFExampleRecord(str(tiny.examples_path), schema=helpers.read_schema(tiny.cfg.schema_path))
    coder = tft.coders.ExampleProtoCoder(tiny.tft_output.transformed_metadata.schema)
    with beam.Pipeline() as pipeline, tft_beam.Context(temp_dir=str(out_dir / "tmp")):
        transform_fn = pipeline | tft_beam.ReadTransformFn(graph_dir)
        raw = pipeline | source.BeamSource()
        transformed, _ = ((raw, source.TensorAdapterConfig()), transform_fn) | tft_beam.TransformDataset()
        _ = (
            transformed
            | beam.Map(coder.encode)
            | beam.io.WriteToTFRecord(str(out_dir / "Split-eval" / "part"), file_name_suffix=".gz")
        )
    return str(out_dir / "Split-eval")


@pytest.mark.parametrize("fixture", ["tiny_taxi", "tiny_payment"])
def test_raw_examples_through_the_graph_give_the_arrays_transforms_beam_output_gave(fixture, request, tmp_path):
    """800 rows of the packaged taxi CSV (binary) and 1,500 (multiclass, 4 refused for their label): the arrays
    from raw examples through the saved graph equal, bit for bit, those from TFT's own Beam transform."""
    tiny = request.getfixturevalue(fixture)
    beam_split = _beam_materialized(tiny, tmp_path / "beam")
    beam_rows = materialize.write_split(
        beam_split, tiny.layout, _parse(tiny.tft_output.transformed_feature_spec()), tmp_path / "from_beam"
    )
    graph = materialize.through_transform_graph(tiny.tft_output, tiny.layout)
    raw_rows = materialize.write_split(str(tiny.examples_dir), tiny.layout, graph, tmp_path / "from_raw")

    assert raw_rows == beam_rows and raw_rows.rows == len(tiny.arrays)
    ours, theirs = ArraySplit.load(tmp_path / "from_raw"), ArraySplit.load(tmp_path / "from_beam")
    # Beam's DirectRunner may reorder rows: compare row sets, sorted by every column.
    order = [np.lexsort(np.column_stack([s.dense, s.categorical, s.label]).T) for s in (ours, theirs)]
    np.testing.assert_array_equal(ours.categorical[order[0]], theirs.categorical[order[1]])
    np.testing.assert_array_equal(ours.label[order[0]], theirs.label[order[1]])
    np.testing.assert_array_equal(ours.dense[order[0]], theirs.dense[order[1]])
