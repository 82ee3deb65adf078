"""Where our Evaluator's time goes at scale: cProfile of the same TFMA run the pipeline's Evaluator makes (our
metrics and slices, our pushed SavedModel), in this process on ``--rows`` rows of a run's eval split.

``python -m tests.bench.evaluator_profile --root runs/bench/ours_1000000 --rows 50000`` prints the functions by own time
and by cumulative time. One process, one Beam worker: per example, the same work the pipeline's two workers share.
cProfile slows Python code about 1.5x; read the seconds as shares.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import tempfile
import time
from pathlib import Path


def eval_sample(root: Path, rows: int, work: Path) -> Path:
    """The first ``rows`` raw eval examples of the run under ``root``, as one gzip TFRecord file."""
    import tensorflow as tf

    from tests.bench import pipelines

    sample = work / f"eval_{rows}"
    if not sample.exists():
        sample.mkdir(parents=True)
        shards = sorted(str(p) for p in pipelines.eval_examples_dir(root).glob("*.gz"))
        records = tf.data.TFRecordDataset(shards, compression_type="GZIP").take(rows)
        with tf.io.TFRecordWriter(str(sample / "data.gz"), options="GZIP") as writer:
            for record in records:
                writer.write(record.numpy())
    return sample


def profile(root: Path, rows: int, work: Path, top: int = 40) -> str:
    from tests.bench import pipelines
    from tests.bench.evaluator_bench import _run, _variants
    from tests.bench.scoring import our_model_spec
    from torchtfx.data.config.dataset import load_dataset_config

    dataset = load_dataset_config("taxi")
    model_dir = pipelines.only_subdir(root / "serving" / "taxi")
    metrics, slices = _variants(dataset)["ours"]
    sample, spec = eval_sample(root, rows, work), our_model_spec(dataset)
    _run(model_dir, sample, spec, metrics, slices, Path(tempfile.mkdtemp(dir=work)))  # warm: model load, tracing
    profiler, started = cProfile.Profile(), time.perf_counter()
    profiler.runcall(_run, model_dir, sample, spec, metrics, slices, Path(tempfile.mkdtemp(dir=work)))
    out = io.StringIO()
    out.write(f"{rows} rows, {len(slices)} slices: {time.perf_counter() - started:.1f} s under cProfile\n")
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, required=True, help="a taxi pipeline root (e.g. a scale bench run)")
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--work", type=Path, default=Path("runs/bench/evaluator_profile"))
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # as tests/bench/__main__.py: TFT's Keras 2 layers
    print(profile(args.root.resolve(), args.rows, args.work.resolve()))


if __name__ == "__main__":
    main()
