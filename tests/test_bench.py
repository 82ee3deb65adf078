"""The benchmark tooling itself: tree-wide peak RSS, and the report built from result files."""

import json
import sys

from bench.measure import run_measured
from bench.report import write_report

_CHILD_ALLOCATES = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', "
    "'import time; b = bytearray(300 * 2**20); b[::4096] = b\"x\" * len(b[::4096]); time.sleep(2)'])\n"
    "child.wait()\n"
)


def test_peak_rss_counts_the_children_of_the_measured_process(tmp_path):
    """The 300 MiB live only in a grandchild: the parent's own max RSS would miss them."""
    run = run_measured([sys.executable, "-c", _CHILD_ALLOCATES], tmp_path / "log.txt")
    assert run.returncode == 0
    assert run.peak_rss_bytes > 300 * 2**20
    assert run.wall_seconds >= 2


def test_failed_command_is_reported_not_raised(tmp_path):
    run = run_measured([sys.executable, "-c", "import sys; print('boom'); sys.exit(4)"], tmp_path / "log.txt")
    assert run.returncode == 4
    assert "boom" in (tmp_path / "log.txt").read_text()


def _reference_result(our_wall: float, auc: float) -> dict:
    stages = {"CsvExampleGen": 10.0, "Transform": 30.0, "Evaluator": 20.0}
    return {
        "ours": {"wall_seconds": our_wall, "peak_rss_gib": 1.0, "stages": {**stages, "TorchTrainer": 25.0},
                 "metrics": {"auc": auc}},
        "reference": {"wall_seconds": 150.0, "peak_rss_gib": 1.5, "stages": {**stages, "Trainer": 60.0},
                      "metrics": {"auc": 0.929}},
        "wall_ratio": our_wall / 150.0,
        "target_wall_ratio": 0.8,
        "target_auc": 0.935,
    }  # fmt: skip


def test_report_says_which_targets_are_met(tmp_path):
    (tmp_path / "reference.json").write_text(json.dumps(_reference_result(100.0, 0.94)))
    text = write_report(tmp_path).read_text()
    assert "| Trainer | 25.0 | 60.0 |" in text
    assert "Wall ratio 0.67 (target ≤ 0.8): met" in text
    assert (tmp_path / "stages_vs_reference.png").stat().st_size > 0


def test_report_flags_a_missed_target(tmp_path):
    (tmp_path / "reference.json").write_text(json.dumps(_reference_result(140.0, 0.93)))
    text = write_report(tmp_path).read_text()
    assert "Wall ratio 0.93 (target ≤ 0.8): **not met**" in text
    assert "AUC 0.9300 (target ≥ 0.935): **not met**" in text
