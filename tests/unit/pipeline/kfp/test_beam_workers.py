"""The Beam worker count of a step: its own pod's CPU limit, read from fake cgroup files, never the node's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchtfx.pipeline.kfp import beam_workers
from torchtfx.pipeline.kfp.beam_workers import beam_worker_args, pod_cpu_count

MULTI = "--direct_running_mode=multi_processing"


def cgroup_v2(root: Path, cpu_max: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cpu.max").write_text(cpu_max + "\n")
    return root


def cgroup_v1(root: Path, quota: int, period: int = 100000, controller: str = "cpu") -> Path:
    (root / controller).mkdir(parents=True)
    (root / controller / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (root / controller / "cpu.cfs_period_us").write_text(f"{period}\n")
    return root


@pytest.mark.parametrize(
    ("cpu_max", "cpus"),
    [("400000 100000", 4), ("250000 100000", 2), ("50000 100000", 1), ("800000 200000", 4), ("max 100000", 96)],
)
def test_cgroup_v2_quota_over_period_capped_by_the_cpus_the_process_may_use(tmp_path, cpu_max, cpus):
    assert pod_cpu_count(cgroup_v2(tmp_path, cpu_max), affinity=lambda: 96) == cpus


@pytest.mark.parametrize(
    ("quota", "controller", "cpus"), [(800000, "cpu", 8), (-1, "cpu", 96), (300000, "cpu,cpuacct", 3)]
)
def test_cgroup_v1_quota_over_period(tmp_path, quota, controller, cpus):
    assert pod_cpu_count(cgroup_v1(tmp_path, quota, controller=controller), affinity=lambda: 96) == cpus


def test_without_cgroup_files_the_cpus_the_process_may_run_on(tmp_path):
    assert pod_cpu_count(tmp_path / "none", affinity=lambda: 6) == 6
    assert pod_cpu_count(tmp_path / "none") == len(os.sched_getaffinity(0))
    # A limit above the CPUs this process may use (a cpuset) is capped by them.
    assert pod_cpu_count(cgroup_v2(tmp_path / "v2", "1600000 100000"), affinity=lambda: 4) == 4


def test_multi_processing_gets_the_pods_cpu_count(tmp_path, monkeypatch):
    root = cgroup_v2(tmp_path, "400000 100000")
    monkeypatch.setattr(beam_workers, "_affinity", lambda: 64)  # a 64-CPU node
    assert beam_worker_args([MULTI], root) == [MULTI, "--direct_num_workers=4"]
    # --direct_num_workers=0 would be multiprocessing.cpu_count() (the node's): replaced in place, both forms.
    assert beam_worker_args([MULTI, "--direct_num_workers=0", "--x=1"], root) == [
        MULTI,
        "--direct_num_workers=4",
        "--x=1",
    ]
    assert beam_worker_args(["--direct_num_workers", "0", MULTI], root) == ["--direct_num_workers=4", MULTI]
    assert beam_worker_args(["--runner=DirectRunner", "--direct_running_mode", "multi_threading"], root)[-1] == (
        "--direct_num_workers=4"
    )


@pytest.mark.parametrize(
    "args",
    [
        [],  # Beam's default mode, in_memory: one worker (any other count only draws Beam's warning)
        ["--direct_running_mode=in_memory"],
        [MULTI, "--direct_num_workers=3"],  # the user's own count
        [MULTI, "--runner=DataflowRunner", "--project=p"],  # workers are the runner's business
        ["--runner", "FlinkRunner", MULTI],
    ],
)
def test_other_args_are_left_as_they_are(tmp_path, args):
    assert beam_worker_args(args, cgroup_v2(tmp_path, "400000 100000")) == args
