"""Where the CPU goes in a whole pipeline run: py-spy samples every process (Beam and DDP workers too).

``python -m tests.bench.profile --root runs/bench/profile`` runs ``torchtfx run`` under
``py-spy record --subprocesses`` and sorts every sample into the categories the optimization work asks
about (imports in fresh processes, TF tracing, tf.Example parsing, ...), overall and per component.
Writes ``<out>/<name>.json``; the raw collapsed stacks stay beside the run root. py-spy slows what it
samples (several times over for the DDP workers): read the CPU seconds as shares, not as timings.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import sys
from pathlib import Path

from tests.bench.measure import require_success, run_measured

RATE_HZ = 50
# First match wins: the order goes from the most specific activity to the most general one.
CATEGORIES = (
    ("python imports (process start-up)", ("_find_and_load",)),
    ("TF graph tracing / autograph", ("func_graph.py", "autograph", "polymorphic_function/tracing", "_trace")),
    ("onnx2tf conversion", ("onnx2tf",)),
    ("ONNX export (torch.onnx)", ("torch/onnx",)),
    ("DDP training step (torch)", ("torch_trainer/train.py",)),
    ("tf.Example decode/encode in Python", ("example_coder", "tf_example_decoder", "csv_decoder", "_ParseExample")),
    ("TFMA metrics", ("tensorflow_model_analysis",)),
    ("TFDV statistics", ("tensorflow_data_validation",)),
    ("TF Transform", ("tensorflow_transform",)),
    ("TF eager/graph execution", ("tensorflow/python",)),
    ("Beam runner and workers", ("apache_beam",)),
    ("ML Metadata / MLflow", ("ml_metadata", "mlflow", "sqlalchemy")),
    ("PyTorch (other)", ("torch/",)),
)
# The component whose executor a sample's stack runs under (the pipeline process runs every executor).
STAGES = (
    ("Transform", "tfx/components/transform/executor.py"),
    ("Evaluator", "tfx/components/evaluator/executor.py"),
    ("TorchTrainer", "components/torch_trainer/executor.py"),
    ("StatisticsGen", "tfx/components/statistics_gen"),
    ("CsvExampleGen", "example_gen"),
    ("CsvExampleGen", "components/csv_input/"),  # its split writer runs no TFX ExampleGen frame (split_writer.py)
    ("ChampionModel", "components/champion"),
    ("Promoter", "components/promoter"),
    ("DataGate", "components/data_gate"),
)
_RECORD = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$", re.S)
_PROCESS = re.compile(r'process \d+:"(?P<cmd>[^"]*)"')


def _records(raw: str):
    """(process command lines, frames, samples) per collapsed-stack record; command lines may hold newlines."""
    buffer = ""
    for line in raw.splitlines():
        buffer = f"{buffer}\n{line}" if buffer else line
        match = _RECORD.match(buffer)
        if match and not buffer.count('"') % 2:
            stack, count = match["stack"], int(match["count"])
            commands = [m["cmd"] for m in _PROCESS.finditer(stack)]
            # Process markers only: a DoFn's frame is "process (path:line)" and stays.
            frames = [f for f in stack.split(";") if not _PROCESS.match(f)]
            yield commands, frames, count
            buffer = ""


def _process_kind(commands: list[str]) -> str:
    innermost = commands[-1] if commands else ""
    if "sdk_worker_main" in innermost or "apache_beam" in innermost:
        return "Beam DirectRunner workers"
    if "torchtfx.components.torch_trainer.worker.train" in innermost:
        return "DDP workers"
    if "torch.distributed.run" in innermost or "torch_trainer.cluster.agent" in innermost:
        return "DDP agent and the workers it forks"
    return "pipeline process (LocalDagRunner + executors)"


def categorize(raw: str, rate_hz: int = RATE_HZ) -> dict:
    by_category: collections.Counter[str] = collections.Counter()
    by_process: collections.Counter[str] = collections.Counter()
    by_leaf: collections.Counter[str] = collections.Counter()
    by_stage: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for commands, frames, count in _records(raw):
        joined = ";".join(frames)
        category = next((name for name, keys in CATEGORIES if any(k in joined for k in keys)), "other")
        by_category[category] += count
        stage = next((name for name, key in STAGES if key in joined), "outside executors (workers, start-up)")
        by_stage[stage][category] += count
        by_process[_process_kind(commands)] += count
        if frames:
            by_leaf[frames[-1]] += count

    def seconds(counter: collections.Counter, top: int | None = None) -> dict[str, float]:
        return {k: round(v / rate_hz, 1) for k, v in counter.most_common(top)}

    return {
        "rate_hz": rate_hz,
        "cpu_seconds_total": round(sum(by_category.values()) / rate_hz, 1),
        "cpu_seconds_by_category": seconds(by_category),
        "cpu_seconds_by_process": seconds(by_process),
        "top_leaf_functions": seconds(by_leaf, 25),
        "cpu_seconds_by_stage": {
            stage: {"total": round(sum(c.values()) / rate_hz, 1), **seconds(c, 5)}
            for stage, c in sorted(by_stage.items(), key=lambda kv: -sum(kv[1].values()))
        },
    }


def require_finished_run(log: Path) -> None:
    """py-spy exits 0 whatever its child does (measured: ``torchtfx run`` refusing a missing --data-dir gave exit
    code 0 and a 2 s "profile" of imports), so the run's own end-of-run report is the proof that it ran."""
    text = log.read_text()
    if not re.search(r"^Pipeline run \S+ finished in ", text, re.MULTILINE):
        tail = "\n".join(text.splitlines()[-15:])
        raise RuntimeError(f"torchtfx run under py-spy did not finish; nothing was written. Log {log}:\n{tail}")


def profile_pipeline(root: Path, out: Path, name: str, data_dir: Path | None = None) -> dict:
    shutil.rmtree(root, ignore_errors=True)
    root.parent.mkdir(parents=True, exist_ok=True)
    raw_path = root.parent / f"{root.name}_raw.txt"  # tens of MB: kept beside the run, not in the results
    torchtfx = str(Path(sys.executable).with_name("torchtfx"))
    py_spy = str(Path(sys.executable).with_name("py-spy"))
    command = [py_spy, "record", "--subprocesses", "--rate", str(RATE_HZ), "--format", "raw", "-o", str(raw_path)]
    command += ["--", torchtfx, "run", "--pipeline-root", str(root)]
    if data_dir is not None:
        command += ["--data-dir", str(data_dir)]
    process = run_measured(command, root.parent / f"{root.name}.log")
    require_success(process, "py-spy record of torchtfx run")
    require_finished_run(Path(process.log))
    result = {"wall_seconds": process.wall_seconds, **categorize(raw_path.read_text())}
    (out / f"{name}.json").write_text(json.dumps(result, indent=2))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, default=Path("runs/bench/profile"))
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--name", default="profile", help="results file name, without .json")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print(json.dumps(profile_pipeline(args.root.resolve(), args.out, args.name, args.data_dir), indent=2))


if __name__ == "__main__":
    main()
