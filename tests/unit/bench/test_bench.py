"""The benchmark tooling itself: tree-wide peak RSS, the report built from result files, and the input-path
benchmark's in-process training loop."""

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from tests import helpers
from tests.bench.measure import run_measured
from tests.bench.report import write_report

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


_TWO_PROCESSES_SHARE = (
    "import mmap, os, time\n"
    "shared = mmap.mmap(-1, 300 * 2**20)  # anonymous and MAP_SHARED: the child maps the same pages\n"
    "for i in range(0, len(shared), 2**20): shared[i : i + 2**20] = b'x' * 2**20  # no 300 MiB temporary\n"
    "if os.fork() == 0:\n"
    "    sum(shared[i] for i in range(0, len(shared), 4096))  # fault every page into the child's RSS too\n"
    "    time.sleep(2); os._exit(0)\n"
    "os.wait()\n"
)


def test_pss_counts_pages_shared_by_two_processes_once(tmp_path):
    """Summed RSS counts the 300 MiB in both processes; summed PSS splits them between the two."""
    run = run_measured([sys.executable, "-c", _TWO_PROCESSES_SHARE], tmp_path / "log.txt")
    assert run.returncode == 0, (tmp_path / "log.txt").read_text()
    assert run.peak_rss_bytes > 580 * 2**20
    assert 290 * 2**20 < run.peak_pss_bytes < 420 * 2**20


def test_failed_command_is_reported_not_raised(tmp_path):
    run = run_measured([sys.executable, "-c", "import sys; print('boom'); sys.exit(4)"], tmp_path / "log.txt")
    assert run.returncode == 4
    assert "boom" in (tmp_path / "log.txt").read_text()


def test_profile_puts_examplegens_split_writer_under_examplegen():
    from tests.bench.profile import categorize

    pipeline = 'process 7:"torchtfx run --dataset taxi"'
    raw = "\n".join(
        [
            f"{pipeline};process (components/csv_input/split_writer.py:90);write (tensorflow/lib/io/tf_record.py:1) 50",
            f"{pipeline};Do (components/torch_trainer/executor.py:80);step (torch/optim/adam.py:544) 25",
        ]
    )
    stages = categorize(raw)["cpu_seconds_by_stage"]
    assert stages["CsvExampleGen"]["total"] == 1.0 and stages["TorchTrainer"]["total"] == 0.5


def test_a_profiled_run_that_stopped_early_is_an_error_not_a_profile(tmp_path):
    """py-spy exits 0 whatever its child does: the profile checks the run's own end-of-run report instead."""
    from tests.bench.profile import require_finished_run

    torchtfx = str(Path(sys.executable).with_name("torchtfx"))
    refused = run_measured(
        [torchtfx, "run", "--data-dir", str(tmp_path / "missing"), "--pipeline-root", str(tmp_path / "root")],
        tmp_path / "refused.log",
    )
    with pytest.raises(RuntimeError, match=r"(?s)did not finish.*does not exist"):
        require_finished_run(Path(refused.log))
    finished = tmp_path / "finished.log"
    finished.write_text("Pipeline run 2026-12-06T04:10:54.801071 finished in 236.7 s\n  ChampionModel  COMPLETE\n")
    require_finished_run(finished)


def _reference_result(our_wall: float, auc: float) -> dict:
    stages = {"CsvExampleGen": 10.0, "Transform": 30.0, "Evaluator": 20.0}
    return {
        "ours": {
            "wall_seconds": our_wall,
            "peak_rss_gib": 1.0,
            "peak_pss_gib": 0.8,
            "stages": {**stages, "TorchTrainer": 25.0},
            "metrics": {"auc": auc},
        },
        "reference": {
            "wall_seconds": 150.0,
            "peak_rss_gib": 1.5,
            "peak_pss_gib": 1.0,
            "stages": {**stages, "Trainer": 60.0},
            "metrics": {"auc": 0.929},
        },
        "wall_ratio": our_wall / 150.0,
        "target_wall_ratio": 0.8,
        "target_auc": 0.935,
        "target_pss_ratio": 1.5,
    }


def test_report_says_which_targets_are_met(tmp_path):
    (tmp_path / "reference.json").write_text(json.dumps(_reference_result(100.0, 0.94)))
    text = write_report(tmp_path).read_text()
    assert "| Trainer | 25.0 | 60.0 |" in text
    assert "Wall ratio 0.67 (target ≤ 0.8): met" in text
    assert "Peak PSS ratio 0.80 (target ≤ 1.5): met." in text
    assert (tmp_path / "stages_vs_reference.png").stat().st_size > 0


def test_report_flags_a_missed_target(tmp_path):
    (tmp_path / "reference.json").write_text(json.dumps(_reference_result(140.0, 0.93)))
    text = write_report(tmp_path).read_text()
    assert "Wall ratio 0.93 (target ≤ 0.8): **not met**" in text
    assert "AUC 0.9300 (target ≥ 0.935): **not met**" in text


def test_taxi_ratios_are_medians_of_interleaved_rounds_with_each_round_beside_them(tmp_path):
    from tests.bench.pipelines import PipelineRun, round_ratios

    def pair(ref_wall: float, our_wall: float, our_pss: float) -> tuple[PipelineRun, PipelineRun]:
        ref = PipelineRun("reference", tmp_path, ref_wall, 1.5, {}, peak_pss_gib=1.0)
        return ref, PipelineRun("torchtfx", tmp_path, our_wall, 2.0, {}, peak_pss_gib=our_pss)

    ratios = round_ratios([pair(100.0, 47.0, 1.5), pair(100.0, 65.0, 1.4), pair(120.0, 60.0, 1.6)])
    assert ratios["wall_ratio"] == pytest.approx(0.5) and ratios["pss_ratio"] == pytest.approx(1.5)
    assert [r["wall_ratio"] for r in ratios["rounds"]] == pytest.approx([0.47, 0.65, 0.5])
    result = {**_reference_result(60.0, 0.94), **ratios, "target_wall_ratio": 0.45, "target_pss_ratio": 1.0}
    result["ours"]["peak_rss_mib_by_process"] = {"7 /w/.venv/bin/torchtfx run --dataset taxi": 1700}
    (tmp_path / "reference.json").write_text(json.dumps(result))
    text = write_report(tmp_path).read_text()
    assert "Wall ratio 0.50 (median of 3 interleaved rounds, min 0.47, max 0.65) (target ≤ 0.45): **not met**." in text
    assert (
        "Peak PSS ratio 1.50 (median of 3 interleaved rounds, min 1.40, max 1.60) (target ≤ 1.0): **not met**." in text
    )
    assert "100.0 / 47.0 s, 1.00 / 1.50 GiB; 100.0 / 65.0 s, 1.00 / 1.40 GiB; 120.0 / 60.0 s, 1.00 / 1.60 GiB." in text
    assert "At the peak (MiB of RSS, the last round): torchtfx pipeline process 1700; reference n/a." in text


def test_report_judges_each_ddp_variant_against_one_worker(tmp_path):
    runs = [
        {
            "name": "1 worker",
            "workers": 1,
            "examples_per_second": 40000.0,
            "eval_auc": 0.938,
            "wall_seconds_with_process_start": 30.0,
            "examples_per_second_each_round": [39000.0, 41000.0],
        },
        {
            "name": "2 workers, DDP",
            "workers": 2,
            "examples_per_second": 48000.0,
            "eval_auc": 0.938,
            "speedup": 1.2,
            "auc_difference": 0.0,
            "wall_seconds_with_process_start": 28.0,
        },
        {
            "name": "2 workers, default settings",
            "workers": 2,
            "examples_per_second": 72000.0,
            "eval_auc": 0.936,
            "speedup": 1.8,
            "auc_difference": 0.002,
            "wall_seconds_with_process_start": 20.0,
        },
    ]
    small = {
        "train_rows": 9000,
        "rounds": 2,
        "wall_ratio": 0.2,
        "runs": {
            "in_process": {"wall_seconds_with_process_start": 2.0, "eval_auc": 0.93},
            "torchrun_2_workers": {"wall_seconds_with_process_start": 10.0, "eval_auc": 0.93},
        },
    }
    ddp = {
        "train_rows": 1000,
        "epochs": 3,
        "rounds": 2,
        "runs": runs,
        "target_speedup": 1.7,
        "target_auc_difference": 0.005,
        "small_data": small,
    }
    (tmp_path / "ddp.json").write_text(json.dumps(ddp))
    text = write_report(tmp_path).read_text()
    assert "| 1 worker | 40000 | 39000, 41000 | 1.00x |" in text
    # Only the default settings are held to the target; the other variants are there to compare.
    assert "- 2 workers, DDP: speed-up 1.20x (target ≥ 1.7 with the default settings), AUC difference 0.0000 " in text
    assert "(target ≤ 0.005): for comparison." in text
    assert "- 2 workers, default settings: speed-up 1.80x" in text and "(target ≤ 0.005): met." in text
    assert "one worker in the executor's process 2.0 s (AUC 0.9300) against 2 DDP workers under torchrun 10.0 s" in text


def test_input_path_bench_trains_in_process_from_arrays_and_from_memory(tmp_path, tiny_taxi):
    """The input-path benchmark's one-rank loop (the Trainer given its model, shards and optimizer), from the
    job's memory-mapped arrays and from splits already in memory: same epochs, a history each."""
    from tests.bench.trainer_bench import _fixed_epochs, _train_in_process
    from torchtfx.components.torch_trainer.handoff.shards import ArraySplit

    job = helpers.tiny_train_job(tmp_path, tiny_taxi)
    job = dataclasses.replace(job, hparams=_fixed_epochs(2, batch_size=64, num_workers=1))
    from_files = _train_in_process(job, None)
    data = Path(job.data_dir)
    in_memory = (ArraySplit.load(data / "train"), ArraySplit.load(data / "eval"))
    from_memory = _train_in_process(job, in_memory)
    assert [h["epoch"] for h in from_files] == [h["epoch"] for h in from_memory] == [1, 2]
    assert from_files[-1]["eval_loss"] == pytest.approx(from_memory[-1]["eval_loss"], rel=1e-6)


def _latency(converted: float, ort: float, torch: float) -> dict:
    return {
        name: {
            batch: {"median_ms": ms * scale, "p90_ms": ms * scale, "calls": 20}
            for batch, scale in (("1", 1), ("32", 2), ("1024", 10))
        }
        for name, ms in (("converted_network", converted), ("onnxruntime", ort), ("torch", torch))
    }


def test_ratios_are_one_runtime_over_another_per_batch_both_have():
    from tests.bench.serving_bench import ratios

    latency = _latency(0.6, 0.2, 0.4)
    assert ratios(latency, "converted_network", "onnxruntime") == pytest.approx({"1": 3.0, "32": 3.0, "1024": 3.0})
    del latency["torch"]["32"]
    assert ratios(latency, "converted_network", "torch") == pytest.approx({"1": 1.5, "1024": 1.5})
    assert ratios(latency, "converted_network_session", "torch") == {}  # not measured: no ratio


def test_zoo_row_joins_the_run_record_and_the_measurements(tmp_path):
    from tests.bench.pipelines import PipelineRun
    from tests.bench.zoo_bench import ZooRun, zoo_row

    run = PipelineRun("torchtfx", tmp_path, 61.5, 1.2, {"TorchTrainer": 30.0})
    zoo_run = ZooRun("dcn", run, tmp_path / "model" / "7", True, "/serving/1", 0.9391, 0.9402, "translator", 2e-7)
    row = zoo_row(zoo_run, {"strategy": "translator", "parity_max_abs_diff": 3e-7})
    assert row["model"] == "dcn" and row["pushed"] and row["blessed"]
    assert row["wall_seconds"] == 61.5 and row["stages"] == {"TorchTrainer": 30.0}
    assert (row["tfma_auc"], row["torch_eval_auc"]) == (0.9402, 0.9391)
    assert row["model_uri"] == str(tmp_path / "model" / "7") and row["parity_max_abs_diff"] == 3e-7


def test_report_renders_the_zoo_table_and_a_failed_model(tmp_path):
    from tests.bench.serving_bench import ratios
    from tests.bench.zoo_bench import RUNTIMES

    latency = _latency(0.6, 0.2, 0.4)
    ok = {
        "model": "mlp",
        "strategy": "translator",
        "repairs": ["erf_gelu"],
        "conversion_seconds": 0.12,
        "parity_max_abs_diff": 2.5e-7,
        "latency": latency,
        "tfma_auc": 0.9381,
        "torch_eval_auc": None,
        "converted_vs_onnxruntime": ratios(latency, "converted_network", "onnxruntime"),
    }
    failed = {"model": "ft_transformer", "error": "parity gate failed | max 0.3\nlog x"}
    zoo = {
        "batch_sizes": [1, 32, 1024],
        "threads": 2,
        "runtimes": list(RUNTIMES),
        "auc_source": "TFMA",
        "models": [ok, failed],
    }
    (tmp_path / "zoo.json").write_text(json.dumps(zoo))
    text = write_report(tmp_path).read_text()
    assert "| mlp | translator | erf_gelu | 0.12 | 2.50e-07 | 0.600 / 0.200 / 0.400 (3.00) |" in text
    assert "| 6.000 / 2.000 / 4.000 (3.00) | 0.9381 | n/a |" in text
    assert "| ft_transformer | failed: parity gate failed / max 0.3 log x |" in text


def test_report_renders_the_fp16_variant_drift_and_latency(tmp_path):
    from tests.bench.zoo_bench import RUNTIMES

    def lat(ms: float) -> dict:
        return {b: {"median_ms": ms, "p90_ms": ms} for b in ("1", "32", "1024")}

    fp16 = {
        "method": "float16 network (CPU)",
        "passed": False,
        "violations": ["9 of 5000 decisions flip"],
        "figures": {"fp16_max_abs_diff": 0.0123, "fp16_mean_abs_diff": 0.0004, "fp16_flips": 9.0},
        "latency": {"fp16_network": lat(0.5), "fp32_network": lat(0.25)},
        "fp16_vs_fp32": {"1": 2.0, "32": 2.0, "1024": 2.0},
    }
    ratios = {"1": 3.0, "32": 3.0, "1024": 3.0}
    model = {
        "model": "mlp",
        "strategy": "translator",
        "repairs": [],
        "conversion_seconds": 0.1,
        "parity_max_abs_diff": 1e-7,
        "latency": _latency(0.6, 0.2, 0.4),
        "tfma_auc": 0.93,
        "torch_eval_auc": 0.93,
        "converted_vs_onnxruntime": ratios,
        "fp16": fp16,
    }
    fallback = {**model, "model": "dcn", "strategy": "onnx2tf", "fp16": {"error": "needs the translator"}}
    zoo = {
        "batch_sizes": [1, 32, 1024],
        "threads": 2,
        "runtimes": list(RUNTIMES),
        "auc_source": "TFMA",
        "models": [model, fallback],
    }
    (tmp_path / "zoo.json").write_text(json.dumps(zoo))
    text = write_report(tmp_path).read_text()
    assert "| mlp | float16 network (CPU) | 1.23e-02 | 4.00e-04 | 9 | refused: 9 of 5000 decisions flip |" in text
    assert "0.500 / 0.250 (2.00)" in text
    assert "| dcn | no variant: needs the translator |" in text


def test_report_judges_the_network_targets_on_the_c_api_runtime(tmp_path):
    from tests.bench.serving_bench import ratios
    from tests.bench.zoo_bench import RUNTIMES

    latency = _latency(0.6, 0.2, 0.4)  # from Python: 3x onnxruntime, 1.5x torch
    latency["converted_network_session"] = {
        b: {"median_ms": v["median_ms"] / 2} for b, v in latency["onnxruntime"].items()
    }
    fast = {
        "model": "mlp",
        "strategy": "translator",
        "repairs": [],
        "conversion_seconds": 0.1,
        "parity_max_abs_diff": 1e-7,
        "latency": latency,
        "target_runtime": "converted_network_session",
        "converted_vs_onnxruntime": ratios(latency, "converted_network_session", "onnxruntime"),
        "converted_vs_torch": ratios(latency, "converted_network_session", "torch"),
    }
    zoo = {
        "batch_sizes": [1, 32, 1024],
        "threads": 2,
        "runtimes": list(RUNTIMES),
        "auc_source": "TFMA",
        "models": [fast],
    }
    (tmp_path / "zoo.json").write_text(json.dumps(zoo))
    text = write_report(tmp_path).read_text()
    assert (
        "- mlp: `converted_network_session` / onnxruntime: 1: 0.50, 32: 0.50, 1024: 0.50; at batch 1024 0.50 "
        "(target ≤ 1.5): met; `converted_network_session` / PyTorch eager: 1: 0.25" in text
    )
    assert "From Python (`converted_network`, a ConcreteFunction call): / onnxruntime 1: 3.00" in text


def _serving_against_reference(ours_ms: tuple[float, ...], reference_ms: tuple[float, ...]) -> dict:
    """A serving result with the reference's whole signature beside ours at batch 1, 32 and 1024."""
    batches = ("1", "32", "1024")

    def lat(values: tuple[float, ...]) -> dict:
        return {b: {"median_ms": ms, "p90_ms": ms, "calls": 20} for b, ms in zip(batches, values, strict=True)}

    ops = {"ParseExampleV2": 0.2, "StatefulPartitionedCall": 0.1, "MatMul": 0.06, "Cast": 0.03, "Const": 0.01}
    profile = {
        "wall_ms": 0.5,
        "nodes": 40,
        "traced_ms_per_call": 0.4,
        "top_nodes": [],
        "ops": {op: {"ms_per_call": ms, "nodes": 1} for op, ms in ops.items()},
        "stages": {"network_and_rest": 0.1, "parse": 0.2, "tft_layer": 0.1},
    }
    return {
        "latency": {"savedmodel_signature_session": lat(ours_ms), "reference_signature_session": lat(reference_ms)},
        "onnx2tf_conversion_seconds": 0.1,
        "parity_examples": 10,
        "parity_max_abs_diff": 1e-7,
        "reference_model_dir": "/runs/reference/serving/1",
        "signature_target_runtime": "savedmodel_signature_session",
        "signature_vs_reference": {b: o / r for b, o, r in zip(batches, ours_ms, reference_ms, strict=True)},
        "target_vs_reference": 1.0,
        "signature_op_profile": {"ours": {"1": profile, "1024": profile}, "reference": {"1": profile}},
    }


def test_report_judges_our_whole_signature_against_the_references_at_every_batch(tmp_path):
    (tmp_path / "serving.json").write_text(json.dumps(_serving_against_reference((0.5, 0.8, 3.0), (1.0, 1.6, 2.0))))
    text = write_report(tmp_path).read_text()
    assert "- batch 1: ours 0.500 ms, reference 1.000 ms: 0.50x (target ≤ 1.0): met." in text
    assert "- batch 32: ours 0.800 ms, reference 1.600 ms: 0.50x (target ≤ 1.0): met." in text
    assert "- batch 1024: ours 3.000 ms, reference 2.000 ms: 1.50x (target ≤ 1.0): **not met**." in text
    assert (
        "ours at batch 1 (0.40 ms) parse 50%, function calls 25%, the other ops 25% (top op types there: "
        "MatMul 15%, Cast 8%), at batch 1024 (0.40 ms) parse 50%" in text
    )
    assert "; reference at batch 1 (0.40 ms) parse 50%" in text and "Const" not in text
    assert "`savedmodel_signature_session`" in text and "`reference_signature_session`" in text


def test_report_says_why_the_references_signature_was_not_measured(tmp_path):
    result = _serving_against_reference((0.5, 0.8, 3.0), (1.0, 1.6, 2.0))
    for key in ("signature_vs_reference", "signature_target_runtime", "target_vs_reference"):
        del result[key]
    result["reference_unavailable"] = "the reference pipeline pushed no model (not blessed)"
    (tmp_path / "serving.json").write_text(json.dumps(result))
    text = write_report(tmp_path).read_text()
    assert "- The reference's signature was not measured: the reference pipeline pushed no model (not blessed)." in text
    assert "target ≤ 1.0" not in text


def test_evaluator_bench_measures_each_of_our_metrics_against_the_reference_config(taxi_cfg):
    from tests.bench.evaluator_bench import _variants

    variants = _variants(taxi_cfg)
    reference_metrics, reference_slices = variants["reference"]
    assert [m.class_name for m in reference_metrics] == ["BinaryAccuracy"] and len(reference_slices) == 1
    ours_metrics, _ = variants["ours_overall"]
    names = {m.class_name for m in ours_metrics}
    assert {"HistogramAUC", "HistogramCalibration", "HistogramCalibrationPlot", "HistogramBinaryAccuracy"} <= names
    assert len(variants["ours"][1]) == 1 + len(taxi_cfg.slices)
    assert {f"+{m.class_name}" for m in ours_metrics if m.class_name != "BinaryAccuracy"} <= set(variants)
    assert all(not m.HasField("threshold") and not m.per_slice_thresholds for m in ours_metrics)


def test_report_judges_the_evaluator_at_equal_slices(tmp_path):
    result = {
        "benchmark": "evaluator",
        "seconds": {"reference": 4.0, "ours_overall": 6.0, "ours": 9.0, "+AUC": 5.0},
        "rounds": {"reference": [4.0, 4.0]},
        "ratio_to_reference": {"reference": 1.0, "ours_overall": 1.5, "ours": 2.25, "+AUC": 1.25},
        "extra_seconds": {"+AUC": 1.0},
        "slices": ["overall"],
        "target_ratio_equal_slices": 1.2,
    }
    (tmp_path / "evaluator.json").write_text(json.dumps(result))
    text = write_report(tmp_path).read_text()
    assert "| +AUC | 5.00 | 1.25 |" in text
    assert "ours takes 1.50x the reference's (target ≤ 1.2): **not met**" in text


def _pipeline_run(name: str, wall: float, pss: float, auc: float, stages: dict, eval_examples: int) -> dict:
    processes = {
        "1 /work/.venv/bin/python -m tests.bench.reference_pipeline --root r": 900,
        "2 python -m sdk_worker_main": 80,
    }
    return {
        "name": name,
        "root": f"/w/{name}",
        "wall_seconds": wall,
        "peak_rss_gib": pss * 1.3,
        "peak_pss_gib": pss,
        "stages": stages,
        "auc": auc,
        "eval_examples": eval_examples,
        "peak_rss_mib_by_process": processes,
        "evaluator_metrics": {"binary_accuracy": 0.81, "example_count": eval_examples},
    }


def _scale_size(
    rows: int, our_wall: float, our_pss: float, our_auc: float, ref_examples: int = 333_296, ref_wall: float = 700.0
) -> dict:
    from tests.bench.scale_bench import comparison

    ours = _pipeline_run(
        "torchtfx",
        our_wall,
        our_pss,
        our_auc,
        {"CsvExampleGen": 85.0, "TorchTrainer": 40.0, "ChampionModel": 2.0, "Evaluator": 270.0},
        333_296,
    )
    ref = _pipeline_run(
        "tfx_taxi_native_keras",
        ref_wall,
        2.0,
        0.9300,
        {"CsvExampleGen": 120.0, "Trainer": 200.0, "latest_blessed_model_resolver": 0.0, "Evaluator": 150.0},
        ref_examples,
    )
    ref["auc_seconds"] = 31.5
    beam = ["--direct_running_mode=multi_processing", "--direct_num_workers=2", "--setup_file=/w/setup.py"]
    size = {
        "rows": rows,
        "data_bytes": 130 * 2**20,
        "generate_seconds": 5.0,
        "beam_args": beam,
        "ours": ours,
        "reference": ref,
    }
    return {**size, **comparison(ours, ref)}


def _scale_result(*sizes: dict) -> dict:
    from tests.bench.scale_bench import TARGETS, time_ratios

    return {"benchmark": "scale", "sizes": list(sizes), "targets": dict(TARGETS), **time_ratios(list(sizes))}


def test_scale_report_sets_ours_beside_the_reference_and_judges_the_targets_at_1m_rows(tmp_path):
    met = _scale_size(1_000_000, our_wall=420.0, our_pss=1.9, our_auc=0.9340)
    (tmp_path / "scale.json").write_text(json.dumps(_scale_result(met)))
    text = write_report(tmp_path).read_text()
    assert "## 5. Scale: against the reference at 1,000,000 rows (synthetic taxi rows)" in text
    assert "### 1,000,000 rows" in text and "`--direct_running_mode=multi_processing --direct_num_workers=2" in text
    assert "| Trainer | 40.0 | 200.0 |" in text and "| Evaluator | 272.0 | 150.0 |" in text
    assert "| **wall (whole command)** | **420.0** | **700.0** |" in text
    assert "| AUC | 0.9340 | 0.9300 |" in text and "| eval examples | 333,296 | 333,296 |" in text
    assert "Wall ratio 0.60 (target ≤ 0.65): met; peak PSS ratio 0.95 (target ≤ 1.0): met; " in text
    assert "AUC ours - reference +0.0040 (target ≥ -0.005): met." in text
    assert "Eval example counts equal." in text
    assert "torchtfx pipeline process 900, Beam worker 80; reference pipeline process 900" in text
    assert "Our peak PSS at 1,000,000 rows 1.90 GiB (target ≤ 3.5 at 5,000,000 rows): for comparison." in text
    assert "Wall at" not in text  # one size: no time ratio
    assert (tmp_path / "scale_stages.png").stat().st_size > 0


def test_scale_report_flags_missed_targets_and_judges_5m_rows(tmp_path):
    missed = _scale_size(1_000_000, our_wall=600.0, our_pss=3.2, our_auc=0.9240, ref_examples=333_000)
    large = _scale_size(5_000_000, our_wall=3600.0, our_pss=4.2, our_auc=0.9300, ref_wall=3500.0)
    (tmp_path / "scale.json").write_text(json.dumps(_scale_result(missed, large)))
    text = write_report(tmp_path).read_text()
    assert "Wall ratio 0.86 (target ≤ 0.65): **not met**; peak PSS ratio 1.60 (target ≤ 1.0): **not met**; " in text
    assert "AUC ours - reference -0.0060 (target ≥ -0.005): **not met**." in text
    assert "Eval example counts **not equal**: the splits differ." in text
    assert "Wall ratio 1.03 (target ≤ 0.65): for comparison" in text  # the ratio targets are set at 1M rows
    assert "Our peak PSS at 5,000,000 rows 4.20 GiB (target ≤ 3.5 at 5,000,000 rows): **not met**." in text
    assert "torchtfx 6.00 (target ≤ 5.5 for 5,000,000 / 1,000,000): **not met**; reference 5.00." in text


def test_scale_report_says_where_a_reference_that_did_not_finish_stopped(tmp_path):
    from tests.bench.scale_bench import comparison

    done = _scale_size(1_000_000, our_wall=420.0, our_pss=1.9, our_auc=0.9340)
    large = _scale_size(5_000_000, our_wall=2100.0, our_pss=3.3, our_auc=0.9390, ref_wall=1500.0)
    large["reference"].update(returncode=-9, stopped_in="CsvExampleGen", stages={}, auc=None, eval_examples=None)
    large.update(comparison(large["ours"], large["reference"]))
    (tmp_path / "scale.json").write_text(json.dumps(_scale_result(done, large)))
    text = write_report(tmp_path).read_text()
    assert large["wall_ratio"] is None and large["pss_ratio"] is None and large["auc_delta"] is None
    assert "| **wall (whole command)** | **2100.0** | **1500.0** (stopped in CsvExampleGen) |" in text
    assert "The reference did not finish: it stopped in CsvExampleGen after 1500 s (exit code -9;" in text
    assert "Eval example counts not compared (the reference did not finish)." in text
    assert "Our peak PSS at 5,000,000 rows 3.30 GiB (target ≤ 3.5 at 5,000,000 rows): met." in text
    assert "torchtfx 5.00 (target ≤ 5.5 for 5,000,000 / 1,000,000): met; reference n/a (it did not finish)." in text


def test_a_failed_reference_run_is_read_back_with_its_finished_stages_and_the_one_it_stopped_in(monkeypatch):
    from tests.bench import pipelines
    from tests.bench.measure import ProcessRun
    from torchtfx.pipeline.reporting.summary import RunSummary, StageTime

    stages = [StageTime("CsvExampleGen", "COMPLETE", 120.0), StageTime("StatisticsGen", "RUNNING", 30.0)]
    monkeypatch.setattr(pipelines, "latest_recorded_run", lambda root: RunSummary("run", stages, {}))
    process = ProcessRun(["python"], -9, 900.0, 20 * 2**30, "/w/reference.log")
    run = pipelines.PipelineRun.measured("tfx_taxi_native_keras", Path("/w/reference"), process)
    assert (run.returncode, run.stopped_in, run.stages) == (-9, "StatisticsGen", {"CsvExampleGen": 120.0})

    def no_store(root):
        raise RuntimeError("no pipeline run recorded")

    monkeypatch.setattr(pipelines, "latest_recorded_run", no_store)
    run = pipelines.PipelineRun.measured("tfx_taxi_native_keras", Path("/w/reference"), process)
    assert (run.stopped_in, run.stages) == ("before the first stage", {})


def test_report_leaves_out_a_scale_result_of_the_old_format(tmp_path, caplog):
    old = {
        "runs": [{"rows": 1_000_000, "wall_seconds": 500.0, "peak_rss_gib": 3.9, "stages": {"Evaluator": 1.0}}],
        "pss_target_gib": 4.0,
        "time_ratio_target": 5.5,
    }
    (tmp_path / "scale.json").write_text(json.dumps(old))
    with caplog.at_level("INFO", logger="tests.bench.report"):
        text = write_report(tmp_path).read_text()
    assert "## 5." not in text and not (tmp_path / "scale_stages.png").exists()
    assert "written before scale ran the reference beside ours" in caplog.text


def test_scale_beam_args_are_sized_for_the_generated_data_dir(tmp_path, taxi_cfg):
    from tests.bench import pipelines, scale_bench
    from torchtfx.pipeline.settings.beam_args import SMALL_INPUT_BYTES

    data = tmp_path / "data"
    data.mkdir()
    with (data / "part-00000.csv").open("w") as handle:
        handle.write("trip_miles,tips\n")
        handle.truncate(SMALL_INPUT_BYTES + 1)  # sparse: 32 MiB on paper, no disk or write time
    args = scale_bench.shared_beam_args(taxi_cfg, data, tmp_path / "ours", beam_workers=3)
    assert args[:2] == ["--direct_running_mode=multi_processing", "--direct_num_workers=3"]
    assert scale_bench.our_run_flags(args) == ["--beam-mode", "multi_processing"]
    # Without a data dir: the packaged 15k-row taxi CSV, as the taxi-size reference benchmark runs it.
    packaged = pipelines.beam_args(3, taxi_cfg, tmp_path / "ours")
    assert packaged[:2] == ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def test_scale_generates_once_then_runs_the_reference_then_ours_from_cold_roots(tmp_path, monkeypatch):
    from tests.bench import pipelines, scale_bench
    from tests.bench.pipelines import PipelineRun

    calls = []

    def generate(rows, out_dir, seed):
        out_dir.mkdir(parents=True)
        (out_dir / "part-00000.csv").write_text("trip_miles,tips\n1.0,2.0\n")
        calls.append(("generate", rows))
        return 0.5

    def run(name, wall):
        def fake(root, data_dir, *rest, **kwargs):
            calls.append((name, root.name, data_dir.name, rest, kwargs.get("extra")))
            return PipelineRun(name, root, wall, 1.0, {"Evaluator": 1.0}, peak_pss_gib=wall / 100)

        return fake

    (tmp_path / "ours_1000").mkdir()  # a root left by an earlier run: removed before ours runs
    monkeypatch.setattr(scale_bench, "_generate", generate)
    monkeypatch.setattr(pipelines, "run_reference", run("reference", 100.0))
    monkeypatch.setattr(pipelines, "run_ours", run("ours", 80.0))
    monkeypatch.setattr(pipelines, "reference_metrics", lambda root: {"auc": 0.93, "eval_examples": 330})
    monkeypatch.setattr(pipelines, "evaluator_metrics", lambda root: {"auc": 0.94, "example_count": 330.0})
    result = scale_bench.scale([1000, 5000], tmp_path, beam_workers=2)
    args = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
    steps = [
        (("generate", n), ("reference", f"reference_{n}", f"data_{n}"), ("ours", f"ours_{n}", f"data_{n}"))
        for n in (1000, 5000)
    ]
    assert [c[:3] for c in calls] == [step for size in steps for step in size]
    assert calls[1][3][0][:2] == args and calls[2][4] == ["--beam-mode", "in_memory"]
    first = result["sizes"][0]
    assert first["beam_args"][:2] == args and first["wall_ratio"] == pytest.approx(0.8)
    assert first["auc_delta"] == pytest.approx(0.01) and first["eval_examples_equal"]
    assert (first["ours"]["eval_examples"], first["reference"]["eval_examples"]) == (330, 330)
    assert result["time_ratio"] == pytest.approx(1.0) and result["time_ratio_rows"] == [1000, 5000]
    assert not (tmp_path / "data_1000").exists()  # the generated rows go once both pipelines ran


_REFERENCE_ROWS = ((0.1, 0), (0.4, 0), (0.35, 1), (0.8, 1), (0.2, 0), (0.9, 1))  # (score, label): AUC 8/9


def _tiny_reference_model(model_dir: Path) -> None:
    """A SavedModel with the reference's two signatures: ``serving_default`` (the score) and
    ``transform_features`` (the label ``tips_xf``)."""
    import tensorflow as tf

    spec = tf.TensorSpec([None], tf.string, name="examples")

    class Reference(tf.Module):
        @tf.function(input_signature=[spec])
        def serve(self, examples):
            return {
                "outputs": tf.io.parse_example(examples, {"score": tf.io.FixedLenFeature([1], tf.float32)})["score"]
            }

        @tf.function(input_signature=[spec])
        def transform(self, examples):
            return {"tips_xf": tf.io.parse_example(examples, {"tips": tf.io.FixedLenFeature([1], tf.int64)})["tips"]}

    module = Reference()
    tf.saved_model.save(
        module, str(model_dir), signatures={"serving_default": module.serve, "transform_features": module.transform}
    )


def _tiny_eval_split(split_dir: Path) -> None:
    import tensorflow as tf

    split_dir.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(split_dir / "data_tfrecord-00000-of-00001.gz"), options="GZIP") as writer:
        for score, label in _REFERENCE_ROWS:
            features = {
                "score": tf.train.Feature(float_list=tf.train.FloatList(value=[score])),
                "tips": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())


def _reference_store(root: Path, outputs: dict[str, dict[str, str]]) -> None:
    """An ML Metadata store laid out as LocalDagRunner writes it: a pipeline_run context, a node context per
    component (``<pipeline>.<component id>``), each execution's output artifacts keyed by output name."""
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2 as pb
    from tfx.orchestration import metadata

    store = metadata_store.MetadataStore(metadata.sqlite_metadata_connection_config(str(root / "metadata.sqlite")))
    run_type = store.put_context_type(pb.ContextType(name="pipeline_run"))
    node_type = store.put_context_type(pb.ContextType(name="node"))
    execution_type = store.put_execution_type(pb.ExecutionType(name="component"))
    artifact_type = store.put_artifact_type(pb.ArtifactType(name="artifact"))
    run = pb.Context(type_id=run_type, name="run-1")
    run.id = store.put_contexts([run])[0]
    for node, keyed in outputs.items():
        context = pb.Context(type_id=node_type, name=f"chicago_taxi_native_keras.{node}")
        context.id = store.put_contexts([context])[0]
        events = []
        for key, uri in keyed.items():
            event = pb.Event(type=pb.Event.OUTPUT)
            event.path.steps.add().key = key
            events.append((pb.Artifact(type_id=artifact_type, uri=uri), event))
        execution = pb.Execution(type_id=execution_type, last_known_state=pb.Execution.COMPLETE)
        store.put_execution(execution, events, [run, context])


def test_reference_metrics_score_its_model_on_its_eval_split_and_keep_its_evaluator_output(tmp_path):
    from tests.bench import pipelines
    from tests.unit.pipeline.reporting import evaluations

    model, examples, evaluation = tmp_path / "model", tmp_path / "examples", tmp_path / "evaluation"
    _tiny_reference_model(model / "Format-Serving")
    _tiny_eval_split(examples / "Split-eval")
    evaluation.mkdir()
    # The reference's EvalConfig: BinaryAccuracy alone, one model (no name).
    evaluations.write(evaluation, [(evaluations.OVERALL, evaluations.metric_key("binary_accuracy", model=""), 0.75)])
    _reference_store(
        tmp_path,
        {
            "CsvExampleGen": {"examples": str(examples)},
            "Trainer": {"model": str(model)},
            "Evaluator": {"evaluation": str(evaluation)},
        },
    )
    found = pipelines.reference_metrics(tmp_path)
    assert found["auc"] == pytest.approx(8 / 9, abs=2e-3) and found["eval_examples"] == len(_REFERENCE_ROWS)
    assert found["evaluator_metrics"] == {"binary_accuracy": 0.75}


def test_the_corpus_names_every_research_factory_file_and_its_installed_package():
    import ast

    from tests.bench.research_zoo import CORPUS, HERE

    files = {p.stem for p in HERE.glob("*.py") if p.name != "__init__.py"}
    assert files <= {m.name for m in CORPUS}, f"factory files missing from CORPUS: {files - {m.name for m in CORPUS}}"
    assert len({m.name for m in CORPUS}) == len(CORPUS)
    for model in CORPUS:
        assert model.path.is_file(), model.name
        versions = model.versions()
        assert None not in versions.values(), f"{model.name}: not installed: {versions}"
        assert model.paper and model.model and model.factory.endswith(f"{model.name}.py:build")
        # The file's docstring names the package at the version installed (requirements-research.in pins it).
        doc = ast.get_docstring(ast.parse(model.path.read_text())) or ""
        assert f"{model.package}=={versions[model.package]}" in doc, model.name


def _research_row(name: str, **extra) -> dict:
    return {
        "model": name,
        "factory": f"tests/bench/research_zoo/{name}.py:build",
        "package": "rtdl_revisiting_models",
        "version": "0.0.2",
        "class": "rtdl_revisiting_models.MLP",
        "paper": "Gorishniy et al. 2021",
        **extra,
    }


def _research_result() -> dict:
    from tests.bench.zoo_bench import RUNTIMES

    measured = {
        "strategy": "translator",
        "repairs": [],
        "conversion_seconds": 0.1,
        "parity_max_abs_diff": 1.19e-7,
        "latency": _latency(0.6, 0.2, 0.4),
        "tfma_auc": 0.9012,
        "torch_eval_auc": 0.8999,
        "converted_vs_onnxruntime": {"1": 0.5, "32": 0.8, "1024": 1.25},
    }
    ok = _research_row(
        "rtdl_mlp",
        **measured,
        conversion={"strategy": "translator", "exporter": "legacy", "repairs": [], "symbolics": []},
        dynamo={"ok": True, "parity_max_abs_diff": 2.4e-7, "dynamo_export_seconds": 6.5, "legacy_export_seconds": 0.31},
    )
    refused = _research_row(
        "rtdl_ft_transformer",
        **measured,
        conversion={
            "strategy": "translator",
            "exporter": "legacy",
            "repairs": ["batch_constants"],
            "symbolics": ["logaddexp"],
        },
        dynamo={
            "ok": False,
            "error": "not translated: unsupported | ops",
            "dynamo_export_seconds": 7.25,
            "legacy_export_seconds": None,
        },
    )
    failed = _research_row("tabnet", error="pipeline run failed: parity gate\nmax 0.3")
    return {
        "sample_rows": 3000,
        "run_args": ["--epochs", "8", "--batch-size", "64"],
        "threads": 2,
        "batch_sizes": [1, 32, 1024],
        "runtimes": list(RUNTIMES),
        "auc_source": "TFMA",
        "parity_tolerance": 1e-5,
        "models": [ok, refused, failed],
    }


def test_report_renders_the_research_corpus_table_for_results_and_the_project_readme(tmp_path):
    from tests.bench.report import research_readme_table

    (tmp_path / "research_zoo.json").write_text(json.dumps(_research_result()))
    text = write_report(tmp_path).read_text()
    ok = (
        "| rtdl_mlp | rtdl_revisiting_models | 0.0.2 | `rtdl_revisiting_models.MLP` | legacy | none | 1.19e-07 "
        "| 0.50 | 1.25 | 0.9012 | 0.8999 | ok (2.40e-07) | 6.50 / 0.31 |"
    )
    refused = (
        "| rtdl_ft_transformer | rtdl_revisiting_models | 0.0.2 | `rtdl_revisiting_models.MLP` | legacy "
        "| batch_constants; symbolics: logaddexp | 1.19e-07 | 0.50 | 1.25 | 0.9012 | 0.8999 "
        "| failed: not translated: unsupported / ops | 7.25 / failed |"
    )
    failed = "| tabnet | rtdl_revisiting_models | 0.0.2 | `rtdl_revisiting_models.MLP` | failed: pipeline run failed: "
    assert "## 6b. Research model corpus" in text and "first 3,000 rows of the taxi CSV" in text
    assert ok in text and refused in text and failed + "parity gate max 0.3 |" in text
    assert "- rtdl_mlp: Gorishniy et al. 2021." in text
    readme = research_readme_table(tmp_path)
    assert ok in readme and refused in readme and "## " not in readme


def test_parse_conversion_reads_the_trainers_onnx_conversion_property():
    from tests.bench.zoo_bench import parse_conversion

    assert parse_conversion("translator; repairs: batch_constants, erf_gelu; exporter: dynamo; symbolics: sinc") == {
        "strategy": "translator",
        "exporter": "dynamo",
        "repairs": ["batch_constants", "erf_gelu"],
        "symbolics": ["sinc"],
    }
    older = parse_conversion("onnx2tf; repairs: none")  # written before the exporter was recorded
    assert older == {"strategy": "onnx2tf", "exporter": None, "repairs": [], "symbolics": []}
    assert parse_conversion(None)["strategy"] is None


def test_zoo_sets_runs_the_chosen_sets_with_each_sets_own_names(tmp_path, monkeypatch):
    from tests.bench import zoo_bench

    calls = []
    monkeypatch.setattr(zoo_bench, "zoo", lambda work, workers, models: calls.append(("zoo", models)) or {})
    monkeypatch.setattr(zoo_bench, "research_zoo", lambda work, workers, names: calls.append(("research", names)) or {})
    assert set(zoo_bench.zoo_sets(tmp_path, 2, "all", ["rtdl_mlp", "dcn"])) == {"zoo", "research_zoo"}
    assert calls == [("zoo", ("dcn",)), ("research", ["rtdl_mlp"])]
    calls.clear()
    assert set(zoo_bench.zoo_sets(tmp_path, 2, "research", ["rtdl_mlp", "dcn"])) == {"research_zoo"}
    assert set(zoo_bench.zoo_sets(tmp_path, 2, "builtin", ["rtdl_mlp"])) == set()  # no built-in model named
    assert set(zoo_bench.zoo_sets(tmp_path, 2, "builtin")) == {"zoo"}
    assert calls == [("research", ["rtdl_mlp"]), ("zoo", None)]
    with pytest.raises(ValueError, match="no_such_model"):
        zoo_bench.zoo_sets(tmp_path, 2, "all", ["no_such_model"])


def test_the_corpus_sample_is_the_first_rows_of_the_csv_written_once(tmp_path):
    from tests.bench.zoo_bench import sample_data

    source = tmp_path / "taxi.csv"
    source.write_text("a,b\n" + "".join(f'{i},"x,{i}"\n' for i in range(10)))
    out = sample_data(source, tmp_path / "sample", rows=3)
    assert (out / "data.csv").read_text().splitlines() == ["a,b", '0,"x,0"', '1,"x,1"', '2,"x,2"']
    mtime = (out / "data.csv").stat().st_mtime_ns
    sample_data(source, tmp_path / "sample", rows=3)
    assert (out / "data.csv").stat().st_mtime_ns == mtime  # unchanged: ExampleGen stays cached


def test_finish_promotion_confirms_the_staged_version_in_the_runs_serving_dir(tmp_path, monkeypatch):
    import subprocess

    from tests.bench import zoo_bench

    ran = []

    def fake_run(command, **kwargs):
        ran.append(command)
        return subprocess.CompletedProcess(command, 0, "labels moved", "")

    monkeypatch.setattr(zoo_bench.subprocess, "run", fake_run)
    zoo_bench.finish_promotion(tmp_path / "root", tmp_path / "serving", tmp_path / "run.log")
    (command,) = ran
    assert command[1:3] == ["promote", "--dataset"] and command[-1] == "--finish"
    assert command[command.index("--serving-dir") + 1] == str(tmp_path / "serving")
    assert "labels moved" in (tmp_path / "run.log").read_text()
    monkeypatch.setattr(zoo_bench.subprocess, "run", lambda c, **k: subprocess.CompletedProcess(c, 1, "", "refused"))
    with pytest.raises(RuntimeError, match="refused"):
        zoo_bench.finish_promotion(tmp_path / "root", tmp_path / "serving", tmp_path / "run.log")


def test_a_dynamo_graph_whose_batch_torch_export_specialized_is_found_by_its_declared_inputs():
    from onnx import TensorProto, helper

    from tests.bench.zoo_bench import _static_batch

    def graph(batch):
        inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [batch, 3]) for name in ("dense", "cat")]
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])
        return helper.make_model(
            helper.make_graph([helper.make_node("Add", ["dense", "cat"], ["y"])], "g", inputs, [out])
        )

    assert _static_batch(graph(17)) == 17
    assert _static_batch(graph("batch")) is None


def test_report_shows_batch_scoring_rates_and_ours_against_each_other_way(tmp_path):
    from tests.bench.report import write_report

    result = {
        "benchmark": "predict",
        "rows": 150020,
        "seconds": {"torchtfx_predict": [10.0, 12.0], "loop": [20.0, 20.0], "pyfunc": [30.0, 31.0]},
        "rows_per_second": {"torchtfx_predict": 13638.2, "loop": 7501.0, "pyfunc": 4918.7},
        "ratio_to": {"loop": 1.818, "pyfunc": 2.773},
    }
    (tmp_path / "predict.json").write_text(json.dumps(result))
    text = write_report(tmp_path).read_text()
    assert "## Batch scoring: `torchtfx predict` (rows per second)" in text
    assert "| plain Python loop over the SavedModel (1,024-row batches) | 7,501 | 20.0, 20.0 | 1.82x |" in text
    assert "| MLflow pyfunc of the champion (whole CSV through pandas) | 4,919 | 30.0, 31.0 | 2.77x |" in text


def test_the_references_temporary_files_go_under_its_own_folder_and_are_removed(tmp_path, monkeypatch):
    """TFX's reference run leaves a 49 MiB sdist in a fresh mkdtemp() per Beam component: the command runs with
    TMPDIR in a folder beside its root, removed after (here a stand-in command writes there, then fails)."""
    from tests.bench import pipelines

    script = "import os, sys, tempfile; open(os.path.join(tempfile.mkdtemp(), 'sdist'), 'w').write('x'); sys.exit(3)"
    seen = []

    def stand_in(command, log_path, env=None, cwd=None):
        seen.append(env["TMPDIR"])
        return run_measured([sys.executable, "-c", script], log_path, env=env, cwd=cwd)

    monkeypatch.setattr(pipelines, "run_measured", stand_in)
    run = pipelines.run_reference(tmp_path / "reference", tmp_path / "data", [], may_fail=True)

    assert seen == [str(tmp_path / "reference.tmp")]
    assert run.returncode == 3 and not (tmp_path / "reference.tmp").exists()
