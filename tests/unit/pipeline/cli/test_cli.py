"""CLI input errors: each names the problem and exits non-zero before any pipeline work."""

from __future__ import annotations

import logging
import os
import sys

import pytest
from click.testing import CliRunner
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from torchtfx.components.data_gate.anomalies import DataValidationError
from torchtfx.data.csv_reader.sources import DataSourceError
from torchtfx.pipeline.cli.main import cli, main
from torchtfx.pipeline.local import runner


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
    assert result.exit_code == 1 and "trainer.num_workers (command line: --num-workers): " in result.output
    assert "must be 'auto' or a whole number from 1 to 1,024, got 0" in result.output
    assert "Traceback" not in result.output


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


def test_version_names_the_project_and_its_stack():
    result = _run("--version")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("torchtfx 0.1.0 (tfx 1.16.0, tensorflow 2.16.2, torch 2.14.1")


def test_zero_beam_workers_is_a_usage_error(tmp_path):
    result = _run("run", "--beam-workers", "0", "--pipeline-root", str(tmp_path / "root"))
    assert result.exit_code == 2 and "'--beam-workers': '0' is not a whole number >= 1" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not (tmp_path / "root").exists()


def test_max_restarts_reaches_the_trainer(tmp_path, monkeypatch):
    seen = {}

    def fake_run_local(settings):  # stops before any pipeline work; only the parsed settings matter here
        seen["hparams"] = settings.hparams
        raise DataSourceError("stop here")

    monkeypatch.setattr(runner, "run_local", fake_run_local)
    result = _run("run", "--max-restarts", "5", "--pipeline-root", str(tmp_path / "root"))
    assert result.exit_code == 1 and "Error: stop here" in result.output
    assert seen["hparams"].max_restarts == 5
    assert _run("run", "--max-restarts", "-1").exit_code == 2


def _failing_run(monkeypatch, err: Exception) -> None:
    def fake_run_local(settings):
        raise err

    monkeypatch.setattr(runner, "run_local", fake_run_local)


def test_a_stage_failure_is_one_line_naming_the_stage_problem(tmp_path, monkeypatch):
    _failing_run(monkeypatch, DataValidationError("data validation failed: 2 anomalies against the schema"))
    result = _run("run", "--pipeline-root", str(tmp_path / "root"))
    assert result.exit_code == 1
    assert "Error: pipeline run failed: data validation failed: 2 anomalies" in result.output
    assert "Traceback" not in result.output and "-v" not in result.output


def test_an_unexpected_error_says_it_may_be_a_bug_and_shows_its_traceback_with_v(tmp_path, monkeypatch):
    """A KeyError or RuntimeError from a bug was printed as if it were the user's mistake, hiding the bug."""
    _failing_run(monkeypatch, KeyError("layout"))
    quiet = _run("run", "--pipeline-root", str(tmp_path / "root"))
    assert quiet.exit_code == 1
    assert "Error: unexpected KeyError: 'layout'" in quiet.output and "rerun with -v" in quiet.output
    loud = _run("-v", "run", "--pipeline-root", str(tmp_path / "root"))
    assert isinstance(loud.exception, KeyError)  # propagates out of the command: main() prints its traceback


def test_main_prints_the_traceback_of_an_unexpected_error_with_v(tmp_path, monkeypatch, capsys):
    _failing_run(monkeypatch, RuntimeError("internal state lost"))
    monkeypatch.setattr(sys, "argv", ["torchtfx", "-v", "run", "--pipeline-root", str(tmp_path / "root")])
    exits = []
    monkeypatch.setattr(os, "_exit", exits.append)
    monkeypatch.setattr(logging, "shutdown", lambda: None)  # main() ends the process; pytest's handlers stay
    main()
    err = capsys.readouterr().err
    assert exits == [1]
    assert "Traceback (most recent call last)" in err and "RuntimeError: internal state lost" in err


def test_every_command_reports_errors_the_same_way():
    """promote, report, compile and submit: a known error is a message, anything else says it may be a bug."""
    from torchtfx.pipeline.cli.kubeflow import compile_cmd, submit_cmd
    from torchtfx.pipeline.cli.promotion import promote, report

    for command in (promote, report, compile_cmd, submit_cmd, cli.commands["run"], cli.commands["draft-schema"]):
        assert command.callback.__wrapped__, command.name  # wrapped by reports_errors


def test_an_unknown_registry_version_is_named_with_those_that_exist(tmp_path, monkeypatch):
    from torchtfx.components.promoter import promotion
    from torchtfx.components.shared.mlflow_client import RegistryVersionNotFoundError
    from torchtfx.pipeline.cli import promotion as promotion_cli

    def unknown(target, version, reason):
        raise RegistryVersionNotFoundError(f"torchtfx-taxi has no registry version {version}; it has [1, 2]")

    monkeypatch.setattr(promotion_cli, "serving_target", lambda settings: None)
    monkeypatch.setattr(promotion, "set_champion", unknown)
    result = _run("promote", "--version", "9", "--reason", "hotfix", "--pipeline-root", str(tmp_path))
    assert result.exit_code == 1 and "Error: torchtfx-taxi has no registry version 9; it has [1, 2]" in result.output
    assert "unexpected" not in result.output


def test_draft_schema_takes_the_missing_value_markers_and_refuses_a_number(tmp_path):
    data = tmp_path / "csv"
    data.mkdir()
    (data / "d.csv").write_text("a,b\n1,x\n-,y\n3,NA\n")
    out = tmp_path / "schema.pbtxt"
    assert _run("draft-schema", "--data-dir", str(data), "--out", str(out), "--missing-value", "-").exit_code == 0
    types = {f.name: f.type for f in text_format.Parse(out.read_text(), schema_pb2.Schema()).feature}
    assert types == {"a": schema_pb2.INT, "b": schema_pb2.BYTES}
    result = _run("draft-schema", "--data-dir", str(data), "--out", str(out), "--missing-value", "0")
    assert result.exit_code == 2 and "--missing-value" in result.output and "holds '0', a number" in result.output


def test_draft_schema_reads_quoted_line_breaks_and_cells_up_to_max_cell_chars(tmp_path):
    data = tmp_path / "csv"
    data.mkdir()
    long_value = "word " * 40_000  # 200,000 characters: past Python's own csv limit of 131,072
    (data / "d.csv").write_text(f'a,b\n1,"two\nlines"\n2,"{long_value}"\n3,x\n')
    out = tmp_path / "schema.pbtxt"
    result = _run("draft-schema", "--data-dir", str(data), "--out", str(out), "--max-cell-chars", "131072")
    assert result.exit_code == 1 and "unexpected" not in result.output
    assert f"{data / 'd.csv'}, line 4: a value longer than 131,072 characters" in result.output
    assert _run("draft-schema", "--data-dir", str(data), "--out", str(out)).exit_code == 0  # default: 1,048,576
    types = {f.name: f.type for f in text_format.Parse(out.read_text(), schema_pb2.Schema()).feature}
    assert types == {"a": schema_pb2.INT, "b": schema_pb2.BYTES}


@pytest.mark.parametrize("value", ["100000", "0"])
def test_predict_refuses_a_beam_worker_count_no_one_can_mean_before_reading_anything(tmp_path, value):
    """``run`` refused --beam-workers 100000 by the declared bounds; ``predict`` took it as it was."""
    data = tmp_path / "data"
    data.mkdir()
    result = CliRunner().invoke(
        cli,
        [
            "predict",
            "--data",
            str(data),
            "--out",
            str(tmp_path / "scores.csv"),
            "--pipeline-root",
            str(tmp_path / "root"),
            "--beam-workers",
            value,
        ],
    )
    assert result.exit_code != 0
    if value != "0":  # 0 is refused by click's own minimum, as for run
        assert "beam.workers (command line: --beam-workers): must be a whole number from 1 to 1,024" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "root").exists() and not (tmp_path / "scores.csv").exists()
