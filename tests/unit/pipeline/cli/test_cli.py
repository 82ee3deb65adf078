"""CLI input errors: each names the problem and exits non-zero before any pipeline work."""

from __future__ import annotations

from click.testing import CliRunner
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from torchtfx.pipeline.cli.main import cli


def _run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_missing_input_directory_is_named(tmp_path):
    result = _run("run", "--data-dir", str(tmp_path / "nope"), "--pipeline-root", str(tmp_path / "root"))
    assert result.exit_code == 1
    assert f"input directory {tmp_path / 'nope'} does not exist" in result.output
    assert not (tmp_path / "root").exists()  # nothing was started


def test_directory_without_csv_files_is_named(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    result = _run("run", "--data-dir", str(tmp_path), "--pipeline-root", str(tmp_path / "root"))
    assert result.exit_code == 1 and "holds no *.csv files" in result.output


def test_empty_csv_file_is_named(tmp_path):
    (tmp_path / "data.csv").write_text("")
    result = _run("run", "--data-dir", str(tmp_path), "--pipeline-root", str(tmp_path / "root"))
    assert result.exit_code == 1 and "data.csv is empty" in result.output


def test_invalid_hyperparameters_are_refused(tmp_path):
    result = _run("run", "--num-workers", "0", "--pipeline-root", str(tmp_path / "root"))
    assert result.exit_code == 1 and "trainer options (--epochs, --batch-size, ...): num_workers: " in result.output
    assert "Input should be greater than 0, got 0" in result.output and "Traceback" not in result.output


def test_draft_schema_writes_types_presence_and_ranges(tmp_path):
    data = tmp_path / "csv"
    data.mkdir()
    (data / "d.csv").write_text("a,b,c\n1,x,2.5\n2,y,\n3,x,4.0\n")
    out = tmp_path / "schema.pbtxt"
    result = _run("draft-schema", "--data-dir", str(data), "--out", str(out))
    assert result.exit_code == 0, result.output
    schema = text_format.Parse(out.read_text(), schema_pb2.Schema())
    features = {f.name: f for f in schema.feature}
    assert features["a"].type == schema_pb2.INT and features["a"].int_domain.max == 3
    assert features["a"].shape.dim[0].size == 1  # present in every row: fixed shape
    assert not features["c"].HasField("shape") and features["c"].value_count.max == 1  # optional
