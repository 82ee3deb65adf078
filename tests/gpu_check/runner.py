"""The items, what this machine can run of them, and each one in a process of its own with a timeout."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from tests.paths import PROJECT_ROOT
from torchtfx.components.torch_trainer.handoff.devices import CudaStatus, cuda_status

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
TORCH, TF = "torch", "tf"  # what an item needs: a CUDA device torch can use, or a GPU TensorFlow sees
RESULT_MARK = "GPU-CHECK-RESULT "  # the child's last word: this, then {"status": ..., "detail": ...}
BUDGET_S = 480  # the "under 8 minutes" for the whole script
_MIN_ITEM_S = 20  # less left of the budget than this: the item is not started


@dataclasses.dataclass(frozen=True)
class Item:
    name: str
    target: str  # "module:function": called with the item's own work folder, returns (status, detail)
    needs: str  # TORCH or TF
    timeout_s: int
    gpus: int = 1
    tensorrt: bool = False  # TF-TRT: TensorRT's libnvinfer must load too


_TRAINING, _SERVING = "tests.gpu_check.training", "tests.gpu_check.serving"
ITEMS = (
    Item("ddp-amp-mlp", f"{_TRAINING}:ddp_mlp_one_rank", TORCH, 150),
    Item("ddp-amp-mlp-2-ranks", f"{_TRAINING}:ddp_mlp_two_ranks", TORCH, 150, gpus=2),
    Item("ddp-amp-text-transformer", f"{_TRAINING}:ddp_text_one_rank", TORCH, 150),
    Item("ddp-amp-text-transformer-2-ranks", f"{_TRAINING}:ddp_text_two_ranks", TORCH, 150, gpus=2),
    Item("tf-trt-fp16-drift-gate", f"{_SERVING}:tf_trt_fp16", TF, 240, tensorrt=True),
    Item("float16-network-drift-gate", f"{_SERVING}:float16_network", TF, 150),
    Item("moe-routing-flip-rate", f"{_SERVING}:moe_routing", TF, 150),
    Item("savedmodel-gpu-cpu-parity", f"{_SERVING}:gpu_cpu_parity", TF, 150),
    Item("torchtfx-run-cuda", f"{_TRAINING}:torchtfx_run_cuda", TORCH, 360),
)


@dataclasses.dataclass(frozen=True)
class Machine:
    """What this machine offers the items: torch's CUDA status, TensorFlow's GPUs, TensorRT."""

    cuda: CudaStatus
    tf_version: str
    tf_build: str  # "CUDA 12.3, cuDNN 8"
    tf_gpus: tuple[str, ...]
    tensorrt_reason: str  # why TF-TRT cannot run here ("" where it can)
    gpu_names: tuple[str, ...]  # nvidia-smi's, where it runs

    def header(self) -> list[str]:
        cuda = self.cuda
        torch_line = f"torch {cuda.torch_version} (CUDA {cuda.torch_cuda or 'none: a CPU-only build'})"
        tf_line = f"TensorFlow {self.tf_version} ({self.tf_build})"
        driver = f"NVIDIA driver {cuda.driver}" if cuda.driver else "no NVIDIA driver reported by the kernel"
        lines = [f"gpu-check: {torch_line}, {tf_line}, {driver}"]
        usable = f"usable, {cuda.devices} GPU(s)" if cuda.usable else f"not usable: {cuda.describe()}"
        lines.append(f"torch CUDA: {usable}; TensorFlow GPUs: {', '.join(self.tf_gpus) or 'none'}")
        lines += [f"GPU: {name}" for name in self.gpu_names]
        return lines

    def skip_reason(self, item: Item) -> str | None:
        if item.needs == TORCH:
            if not self.cuda.usable:
                return f"torch cannot use CUDA: {self.cuda.describe()}"
            if self.cuda.devices < item.gpus:
                return f"needs {item.gpus} GPUs, torch sees {self.cuda.devices}"
            return None
        if not self.tf_gpus:
            return (
                f"tf.config.list_physical_devices('GPU') is empty: TensorFlow {self.tf_version} ({self.tf_build}) "
                "finds no GPU it can use here"
            )
        if item.tensorrt and self.tensorrt_reason:
            return self.tensorrt_reason
        return None


def probe() -> Machine:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow's first import: no INFO lines
    import tensorflow as tf

    build = tf.sysconfig.get_build_info()
    tf_build = f"CUDA {build.get('cuda_version', 'none')}, cuDNN {build.get('cudnn_version', 'none')}"
    gpus = tuple(d.name for d in tf.config.list_physical_devices("GPU"))
    tensorrt = ""
    if gpus:
        from torchtfx.components.torch_trainer.savedmodel.precision import tf_trt_available

        if not tf_trt_available():
            tensorrt = (
                "TF-TRT cannot run: TensorFlow cannot load TensorRT (libnvinfer; is_tensorrt_enabled() is False), "
                "so the FP16 variant is the float16 network (its own item)"
            )
    return Machine(cuda_status(), tf.__version__, tf_build, gpus, tensorrt, _gpu_names())


def _gpu_names() -> tuple[str, ...]:
    """nvidia-smi's names and memory (without creating a CUDA context in this process)."""
    if not shutil.which("nvidia-smi"):
        return ()
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(line.strip() for line in out.stdout.splitlines() if line.strip())


def run_child(argv: list[str], timeout_s: float, log_path: Path) -> tuple[str, str]:
    """Run one item's process (its own session, so that a timeout kills everything it started); its result is the
    last line of its stdout that starts with RESULT_MARK. Its whole output goes to ``log_path``."""
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    proc = subprocess.Popen(argv, **pipes, start_new_session=True, env=child_env(), cwd=PROJECT_ROOT)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        log_path.write_text(out + err)
        return FAIL, f"timed out after {timeout_s:.0f} s (killed; log: {log_path})"
    log_path.write_text(out + err)
    found = [line[len(RESULT_MARK) :] for line in out.splitlines() if line.startswith(RESULT_MARK)]
    if not found:
        last = next((line for line in reversed(err.splitlines()) if line.strip()), "no output")
        return FAIL, f"its process exited with code {proc.returncode} and no result: {last} (log: {log_path})"
    result = json.loads(found[-1])
    if result.get("status") not in (PASS, FAIL, SKIP):
        return FAIL, f"its process reported {found[-1]!r}, not a status (log: {log_path})"
    return result["status"], str(result.get("detail", ""))


def run_item(item: Item, work: Path) -> tuple[str, str]:
    """In the item's own process: its check, any exception a FAIL naming it (the traceback on stderr)."""
    module, function = item.target.split(":")
    work.mkdir(parents=True, exist_ok=True)
    try:
        return getattr(importlib.import_module(module), function)(work)
    except Exception as err:
        traceback.print_exc()
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return FAIL, f"{type(err).__name__}: {first}"


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("TF_USE_LEGACY_KERAS", "1")
    env["HF_HUB_OFFLINE"] = "1"
    return env


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.gpu_check", description=__doc__)
    parser.add_argument("--only", default="", help="comma-separated item names (default: every item)")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S, help="the whole run's time limit in seconds")
    parser.add_argument("--work", type=Path, help="the folder for the items' files (default: a new temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder after a run without failures")
    parser.add_argument("--item", help=argparse.SUPPRESS)  # the child: run this one item in --work
    return parser.parse_args(argv)


def _selected(only: str) -> list[Item]:
    names = [n for n in only.split(",") if n]
    unknown = sorted(set(names) - {i.name for i in ITEMS})
    if unknown:
        raise SystemExit(f"unknown item(s) {unknown}; the items: {', '.join(i.name for i in ITEMS)}")
    return [i for i in ITEMS if not names or i.name in names]


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.item:  # a child: one item, its result as the last line
        item = next(i for i in ITEMS if i.name == args.item)
        status, detail = run_item(item, args.work)
        print(RESULT_MARK + json.dumps({"status": status, "detail": detail}), flush=True)
        return 0
    items, start = _selected(args.only), time.monotonic()
    machine = probe()
    print("\n".join(machine.header()), flush=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    counts = {PASS: 0, FAIL: 0, SKIP: 0}
    for item in items:
        reason, left = machine.skip_reason(item), args.budget_s - (time.monotonic() - start)
        if reason:
            status, detail = SKIP, reason
        elif left < _MIN_ITEM_S:
            status, detail = FAIL, f"not started: {left:.0f} s left of the {args.budget_s:.0f} s budget"
        else:
            command = [sys.executable, "-m", "tests.gpu_check", "--item", item.name, "--work", str(work / item.name)]
            status, detail = run_child(command, min(item.timeout_s, left), work / f"{item.name}.log")
        counts[status] += 1
        print(f"{status} {item.name}: {detail}", flush=True)
    elapsed = time.monotonic() - start
    print(f"gpu-check: {counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped in {elapsed:.0f} s")
    if counts[FAIL] or args.keep:
        print(f"gpu-check: the items' files and logs are in {work}")
    elif not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if counts[FAIL] else 0
