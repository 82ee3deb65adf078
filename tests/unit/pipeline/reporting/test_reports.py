"""The end-of-run console report and the HTML report per task: which metrics they show, in which order, how a
change is coloured, which plots they draw; read from Evaluator outputs in TFMA's formats (evaluations.py)."""

from __future__ import annotations

import re
import struct
import types

import pytest
from ml_metadata.proto import metadata_store_pb2

from tests.unit.pipeline.reporting import evaluations
from torchtfx.components.shared import contracts
from torchtfx.pipeline.reporting import html_report
from torchtfx.pipeline.reporting.console import print_run_report
from torchtfx.pipeline.reporting.summary import RunSummary


def _summary(evaluation_uri: str, task: str) -> RunSummary:
    evaluation = metadata_store_pb2.Artifact(uri=evaluation_uri)
    model = metadata_store_pb2.Artifact(uri="/models/1")
    model.custom_properties[contracts.TASK_PROPERTY].string_value = task
    return RunSummary(
        run_id="run-1",
        stages=[],
        artifacts={contracts.EVALUATOR_ID: {"evaluation": [evaluation]}, contracts.TRAINER_ID: {"model": [model]}},
    )


def _report(tmp_path, task: str, uri: str) -> tuple[str, set[str]]:
    path = html_report.build_report(_summary(uri, task), tmp_path / "root", tracking_uri="file:///unused")
    return path.read_text(), {p.name for p in path.parent.iterdir()}


def _png_width(path) -> int:
    return struct.unpack(">I", path.read_bytes()[16:20])[0]  # the IHDR chunk's width


EVALUATIONS = {"binary": evaluations.binary, "multiclass": evaluations.multiclass, "regression": evaluations.regression}
SHOWN = {
    "binary": [
        "Evaluation (eval split, overall, candidate): auc=0.7000, auc_precision_recall=0.5000, binary_accuracy=0.8000,",
        "  precision=0.6000, recall=0.4000, calibration=1.1000, example_count=100.0000",
    ],
    "multiclass": [
        "Evaluation (eval split, overall, candidate): sparse_categorical_accuracy=0.8000, auc(macro)=0.9000, "
        "auc(micro)=0.9300,",
        "  weighted_example_count=100.0000, example_count=105.0000",
        "  recall per class: 0=0.9000, 1=0.7000, 2=0.5000",
    ],
    "regression": [
        "Evaluation (eval split, overall, candidate): mean_squared_error=1.1000, root_mean_squared_error=1.0488,",
        "  mean_absolute_error=0.7000, squared_pearson_correlation=0.4000, weighted_example_count=100.0000,",
        "  example_count=105.0000",
    ],
}
REJECTION = {
    "binary": "auc          Overall                candidate  0.7000  champion  0.8000  change gate: "
    "candidate - champion >= -0.01",
    "multiclass": "sparse_categorical_accuracy Overall                candidate  0.8000  champion  0.8200  change "
    "gate: candidate - champion >= -0.01",
    "regression": "mean_squared_error Overall                candidate  1.1000  champion  1.0000  change gate: "
    "candidate / champion - 1 <= 0.05",
}


@pytest.mark.parametrize("task", sorted(EVALUATIONS))
def test_the_console_shows_the_task_s_metrics_and_names_the_failed_gate(task, tmp_path, capsys):
    """Binary's line is the one it always was (same metrics, same order)."""
    uri = EVALUATIONS[task](tmp_path)
    settings = types.SimpleNamespace(root=tmp_path / "root", mlflow_default_uri="file:///unused")
    assert print_run_report(_summary(uri, task), 1.0, settings) is False
    out, err = capsys.readouterr()
    assert "\n".join(SHOWN[task]) + "\n" in out
    assert all(len(line) < 120 for line in SHOWN[task])
    assert f"  {REJECTION[task]}" in err and "Candidate REJECTED: 1 gate(s) failed" in err


def test_a_multiclass_evaluation_of_many_classes_wraps_under_120_characters_a_line():
    """Twenty classes were one line of 643 characters."""
    from torchtfx.pipeline.reporting.console import evaluation_lines

    overall = {"sparse_categorical_accuracy": 0.8, "auc(macro)": 0.9, "auc(micro)": 0.93, "example_count": 9000.0}
    overall |= {f"recall[class_id={k}]": k / 20 for k in range(20)}
    lines = evaluation_lines(overall)
    assert all(len(line) < 120 for line in lines) and len(lines) == 4, lines
    assert lines[2].startswith("  recall per class: 0=0.0000, 1=0.0500,") and lines[3].startswith("    ")
    assert "19=0.9500" in lines[3]


def test_the_binary_html_report_keeps_its_auc_plot_table_and_calibration(tmp_path):
    text, files = _report(tmp_path, "binary", evaluations.binary(tmp_path))
    assert {"report.html", "auc_by_slice.png", "calibration.png"} <= files
    assert '<img src="auc_by_slice.png">' in text and "<h2>Calibration</h2>" in text
    head = "".join(
        f"<th>{m}</th>"
        for m in (
            "auc",
            "auc_precision_recall",
            "binary_accuracy",
            "precision",
            "recall",
            "calibration",
            "example_count",
        )
    )
    assert f"<tr><th>slice</th>{head}</tr>" in text
    assert "0.7000 <small style='color:#a00'>(-0.1000)</small>" in text  # AUC fell: red
    assert "0.6500 <small style='color:#070'>(+0.0500)</small>" in text  # AUC rose on Cash: green
    assert _png_width(tmp_path / "root" / "reports" / "run-1" / "auc_by_slice.png") == 900  # one panel


def test_the_multiclass_html_report_plots_accuracy_and_macro_auc_and_no_calibration(tmp_path):
    text, files = _report(tmp_path, "multiclass", evaluations.multiclass(tmp_path))
    assert "auc_by_slice.png" in files and "calibration.png" not in files
    assert "<h2>Calibration</h2>" not in text
    assert "<th>sparse_categorical_accuracy</th><th>auc(macro)</th><th>auc(micro)</th>" in text
    assert "<th>recall[class_id=2]</th>" in text
    assert _png_width(tmp_path / "root" / "reports" / "run-1" / "auc_by_slice.png") == 900  # two 5-inch panels
    assert "sparse_categorical_accuracy Overall" in text  # the gate that failed, by name


def test_the_regression_html_report_colours_a_higher_error_red(tmp_path):
    text, files = _report(tmp_path, "regression", evaluations.regression(tmp_path))
    assert "calibration.png" not in files
    assert "<th>mean_squared_error</th><th>root_mean_squared_error</th><th>mean_absolute_error</th>" in text
    assert "1.1000 <small style='color:#a00'>(+0.1000)</small>" in text  # MSE rose: worse, red
    assert "0.7000 <small style='color:#070'>(-0.0500)</small>" in text  # MAE fell: better, green
    assert "0.5000 <small style='color:#070'>(-0.1000)</small>" in text  # MSE fell on Cash
    assert _png_width(tmp_path / "root" / "reports" / "run-1" / "auc_by_slice.png") == 1350  # MSE, MAE, RMSE


def test_a_first_run_without_champion_shows_plain_values(tmp_path):
    text, _ = _report(tmp_path, "binary", evaluations.binary(tmp_path, champion=False))
    assert "<td>0.7000</td>" in text and "All gates passed." in text


UNCHANGED = (
    "The candidate is identical to the champion (serving version 3, registry version 4; model fingerprint "
    "sha256-tree-v1:0123456789ab): nothing was pushed or registered. models.config and TF Serving were left as "
    "they were."
)


def _unchanged_summary(evaluation_uri: str, blessed: int) -> RunSummary:
    """What the Promoter records for a rerun of the champion (components/promoter/executor.py)."""
    summary = _summary(evaluation_uri, "binary")
    pushed, blessing = metadata_store_pb2.Artifact(), metadata_store_pb2.Artifact()
    pushed.custom_properties[contracts.PUSHED_PROPERTY].int_value = 0
    pushed.custom_properties[contracts.UNCHANGED_PROPERTY].string_value = UNCHANGED
    pushed.custom_properties[contracts.IDENTICAL_TO_PROPERTY].int_value = 3
    blessing.custom_properties[contracts.BLESSED_PROPERTY].int_value = blessed
    summary.artifacts[contracts.PROMOTER_ID] = {"pushed_model": [pushed]}
    summary.artifacts[contracts.EVALUATOR_ID]["blessing"] = [blessing]
    return summary


def test_a_rerun_of_the_champion_reports_that_nothing_was_pushed_and_succeeds(tmp_path, capsys):
    settings = types.SimpleNamespace(root=tmp_path / "root", mlflow_default_uri="file:///unused")
    summary = _unchanged_summary(evaluations.binary(tmp_path, champion=False), blessed=1)
    assert print_run_report(summary, 1.0, settings) is True  # exit code 0
    out, err = capsys.readouterr()
    assert f"Nothing to promote. {UNCHANGED}\n" in out
    assert "Promoted" not in out and "REJECTED" not in err and "All gates passed" not in err
    report = (tmp_path / "root" / "reports" / "run-1" / "report.html").read_text()
    assert "<b>Nothing to promote</b>: The candidate is identical to the champion (serving version 3" in report


def test_a_rerun_of_a_champion_that_fails_today_s_gates_says_both(tmp_path, capsys):
    settings = types.SimpleNamespace(root=tmp_path / "root", mlflow_default_uri="file:///unused")
    summary = _unchanged_summary(evaluations.binary(tmp_path), blessed=0)
    assert print_run_report(summary, 1.0, settings) is False  # the gate failed: exit code 3
    out, err = capsys.readouterr()
    assert f"Nothing to promote. {UNCHANGED}\n" in out and "Candidate REJECTED: 1 gate(s) failed" in err


def test_rows_refused_for_their_label_are_shown_in_the_console_and_the_html_report(tmp_path, capsys):
    """Only where rows could be refused (the Trainer wrote the property): a binary label with an optional column."""
    settings = types.SimpleNamespace(root=tmp_path / "root", mlflow_default_uri="file:///unused")
    summary = _summary(evaluations.binary(tmp_path), "binary")
    print_run_report(summary, 1.0, settings)
    assert "refused for their label" not in capsys.readouterr().out
    model = summary.output(contracts.TRAINER_ID, "model")
    model.custom_properties[contracts.LABEL_REFUSED_PROPERTY].string_value = '{"eval": 2, "train": 0}'
    print_run_report(summary, 1.0, settings)
    line = "Rows refused for their label (neither trained on nor evaluated): eval 2, train 0"
    assert f"\n{line}\n" in capsys.readouterr().out
    assert f"<h2>Labels</h2><p>{line}</p>" in (tmp_path / "root" / "reports" / "run-1" / "report.html").read_text()


def _cells(html_text: str) -> dict[tuple[str, str], str]:
    """(slice, metric) -> the HTML table's cell text."""
    rows = [re.findall(r"<t[hd]>(.*?)</t[hd]>", row) for row in html_text.split("<tr>")[1:]]
    header = next(row for row in rows if row and row[0] == "slice")
    body = [row for row in rows if row and row[0] != "slice"]
    return {(row[0], metric): cell for row in body for metric, cell in zip(header[1:], row[1:], strict=False)}


UNDEFINED_CASES = [
    (
        "binary",
        {("g=neg", "auc"), ("g=neg", "auc_precision_recall"), ("g=pos", "auc")},
        {("g=mix", "auc"), ("Overall", "auc"), ("g=pos", "auc_precision_recall")},
    ),
    (
        "multiclass",
        {("g=one", "auc(macro)")},
        {("g=mix", "auc(macro)"), ("Overall", "auc(macro)"), ("g=one", "auc(micro)")},
    ),
]


@pytest.mark.parametrize(("task", "undefined", "defined"), UNDEFINED_CASES)
def test_an_auc_of_a_slice_holding_one_class_reads_undefined_not_tfma_s_zero(task, undefined, defined, tmp_path):
    """TFMA 0.47 writes AUC 0.0 for a slice of one class (AUC-PR 0.0 without positives); the report showed
    "0.0000"."""
    from torchtfx.components.shared.evaluation_results import metric_values
    from torchtfx.pipeline.reporting.one_class import UNDEFINED, undefined_aucs

    uri = evaluations.analyzed(tmp_path / "tfma", task)
    values = metric_values(uri)
    assert all(values[(s, m, "", False)] in (0.0, 1.0) for s, m in undefined)  # what TFMA reports for them
    found = undefined_aucs(uri, values)
    assert undefined <= found and not defined & found
    cells = _cells(_report(tmp_path, task, uri)[0])
    assert all(cells[key] == f"<small>{UNDEFINED}</small>" for key in undefined)
    assert all(re.fullmatch(r"\d\.\d{4}", cells[key]) for key in defined if key in cells)
