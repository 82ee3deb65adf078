"""The quiet console: known-harmless messages dropped by exact text, every other warning shown, -v keeps all."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

from torchtfx.pipeline.cli import console
from torchtfx.pipeline.cli.stderr_relay import filtered

TABLES = (
    "Tables initialized inside a tf.function  will be re-initialized on every invocation of the function. This  "
    "re-initialization can have significant impact on performance.: vocabulary_payment_type/apply_vocab"
)
WORKER_ENTRY = (
    'severity: WARN timestamp {   seconds: 1796486483   nanos: 684708833 } message: "{}" log_location: '
    '"/venv/apache_beam/runners/worker/sdk_worker_main.py:361" thread: "MainThread" '
)
CUFFT = (
    "2026-12-05 16:01:08.565078: E external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:479] Unable to register "
    "cuFFT factory: Attempting to register factory for plugin cuFFT when one has already been registered\n"
)
ATOMIC_DEL = [
    "Exception ignored in: <function AtomicFunction.__del__ at 0x7f77f8185bd0>\n",
    "Traceback (most recent call last):\n",
    '  File "/venv/lib/python3.10/site-packages/tensorflow/python/eager/polymorphic_function/atomic_function.py", '
    "line 291, in __del__\n",
    "TypeError: 'NoneType' object is not subscriptable\n",
]


def _record(name: str, level: int, msg: str, *args) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def _worker(message: str) -> logging.LogRecord:
    entry = WORKER_ENTRY.replace("{}", message.replace("'", "\\'"))
    return _record("apache_beam.runners.portability.local_job_service", logging.WARNING, "Worker: %s", entry)


def _ddp(line: str) -> logging.LogRecord:
    return _record("torchtfx.components.torch_trainer.cluster.launch", logging.INFO, "%s", line)


def test_a_known_harmless_record_is_dropped_and_another_warning_of_the_same_logger_shows():
    quiet = console.ConsoleFilter()
    assert not quiet.filter(_record("absl", logging.WARNING, "ArtifactQuery.property_predicate is not supported."))
    assert not quiet.filter(_record("absl", logging.WARNING, TABLES))
    assert quiet.filter(_record("absl", logging.WARNING, "ContextQuery.property_predicate is not supported."))
    in_place = "Not using the in-place Transform because the following features require analyzing: %s"
    assert not quiet.filter(_record("absl", logging.WARNING, in_place, ("text", "source")))
    # Beam logs a tuple (format, class) as the message; only its own combiner's is known.
    no_iterator = "No iterator is returned by the process method in %s."
    for name, harmless in (("_TopPerBundle", True), ("MyDoFn", False)):
        cls = type(name, (), {"__module__": "apache_beam.transforms.combiners"})
        record = _record("apache_beam.transforms.core", logging.WARNING, (no_iterator, cls))  # type: ignore[arg-type]
        assert quiet.filter(record) is not harmless, name


def test_records_a_beam_worker_sends_are_judged_by_their_own_message():
    quiet = console.ConsoleFilter()
    assert not quiet.filter(
        _worker("No semi_persistent_directory found: Functions defined in __main__ (interactive session) may fail.")
    )
    runner_flags = ["'--direct_runner_use_stacked_bundle'", "'--pipeline_type_check'"]
    for flags in (runner_flags, runner_flags[::-1]):  # the runner passes them in either order
        assert not quiet.filter(_worker(f"Discarding unparseable args: [{', '.join(flags)}]"))
    assert quiet.filter(_worker("Discarding unparseable args: ['--direct_num_workrs=2']"))  # a user's typo
    assert quiet.filter(_worker("Some new worker warning"))


def test_a_default_run_shows_stage_lines_progress_and_every_warning_only():
    run = console.ConsoleFilter(progress_only=True)
    assert run.filter(_record("absl", logging.INFO, "Component %s is running.", "Transform"))
    assert not run.filter(_record("absl", logging.INFO, "Component %s is finished.", "Transform"))
    checked = "Checked the CSV files %s under %s against %s: %s rows"
    assert run.filter(_record("torchtfx.components.csv_input.executor", logging.INFO, checked, "*", "d", "s", 15002))
    assert run.filter(_record("torchtfx.train", logging.INFO, "Training done: best epoch %s of %s", 3, 6))
    assert not run.filter(_record("torchtfx.train", logging.INFO, "epoch %s/%s", 1, 12))
    assert not run.filter(
        _record("torchtfx.components.torch_trainer.handoff.materialize", logging.INFO, "Materialized")
    )
    assert run.filter(_record("torchtfx.components.tf_serving.transition", logging.WARNING, "staged"))
    assert run.filter(_ddp("2026-12-05 16:04:33,809 [rank 0] INFO Training done: best epoch 4 of 5"))
    assert not run.filter(_ddp("2026-12-05 16:04:09,576 [rank 0] INFO epoch 1/12 train_loss=0.2492"))
    progress = "Epoch 1/2: step 207 of 700, 0.48 steps/s, mean train loss so far 0.5010, about 17 min left"
    assert run.filter(_ddp(f"2026-12-07 17:10:36,884 [rank 0] INFO {progress}"))
    assert run.filter(_ddp("2026-12-05 16:04:09,576 [rank 1] WARNING checkpoint write retried"))
    assert run.filter(_ddp("RuntimeError: CUDA out of memory"))  # a worker's raw output: shown


def test_other_commands_show_their_own_info_and_tfx_stage_lines_only():
    default = console.ConsoleFilter()
    assert default.filter(_record("torchtfx.pipeline.kfp.compile", logging.INFO, "Compiled %s", "p"))
    assert default.filter(_record("absl", logging.INFO, "Component %s is finished.", "Transform"))
    assert not default.filter(_record("absl", logging.INFO, "Running driver for %s", "Transform"))


@pytest.fixture
def root_handler(monkeypatch):
    """A console handler of its own on the root logger, and an environment and warnings filters restored after."""
    for name in ("PYTHONWARNINGS", "MLFLOW_LOGGING_LEVEL", "TF_CPP_MIN_LOG_LEVEL", "HF_HUB_DISABLE_PROGRESS_BARS"):
        monkeypatch.setenv(name, "")  # so that monkeypatch removes what configure() sets
        monkeypatch.delenv(name)
    records: list[logging.LogRecord] = []
    handler = logging.StreamHandler()
    handler.emit = records.append
    monkeypatch.setattr(logging.getLogger(), "handlers", [handler])
    mlflow_level = logging.getLogger("mlflow").level
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        yield handler, records, shown
    logging.getLogger("mlflow").setLevel(mlflow_level)


def _emit_harmless_and_unknown(handler: logging.Handler) -> None:
    handler.handle(_record("absl", logging.WARNING, "ArtifactQuery.property_predicate is not supported."))
    handler.handle(_record("torchtfx.components.torch_trainer.handoff.materialize", logging.INFO, "Materialized"))
    handler.handle(_record("absl", logging.WARNING, "an unknown warning"))
    python = "You are using a non-supported Python version (3.10.13). Google will not post any further updates"
    warnings.warn_explicit(python, FutureWarning, "x.py", 1, module="google.api_core._python_version_support")
    warnings.warn_explicit("an unknown FutureWarning", FutureWarning, "x.py", 1, module="google.api_core.x")


def test_default_console_drops_the_harmless_and_keeps_the_rest(root_handler, monkeypatch):
    handler, records, shown = root_handler
    console.configure(verbose=False)
    console.show_progress_only()
    _emit_harmless_and_unknown(handler)
    assert [r.getMessage() for r in records] == ["an unknown warning"]
    assert [str(w.message) for w in shown] == ["an unknown FutureWarning"]
    assert os.environ["PYTHONWARNINGS"] == console.python_warnings()  # for the Beam and DDP workers
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"


def test_verbose_keeps_every_record_and_warning(root_handler):
    handler, records, shown = root_handler
    console.configure(verbose=True)
    console.show_progress_only()  # a no-op with -v
    _emit_harmless_and_unknown(handler)
    assert len(records) == 3 and len(shown) == 2
    assert handler.filters == []
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ


def test_a_default_console_turns_off_transformers_loading_bars_in_the_process_and_its_children():
    """configure() runs before transformers is imported; the bar's switch is read at that import."""
    script = textwrap.dedent("""
        from torchtfx.pipeline.cli import console
        console.configure(verbose=False)
        from transformers.utils import logging
        print(logging.is_progress_bar_enabled())
    """)
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.strip() == "False", proc.stderr[-2000:]


def test_child_processes_ignore_the_harmless_warnings_by_exact_text():
    script = textwrap.dedent("""
        import warnings
        for module, text in [("google.api_core._python_version_support", "You are using a non-supported Python "
                              "version (3.10.13). Please upgrade"), ("google.api_core.other", "a real warning")]:
            warnings.warn_explicit(text, FutureWarning, "x.py", 1, module=module)
    """)
    env = {"PYTHONWARNINGS": console.python_warnings("default::DeprecationWarning")}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and "Invalid -W option" not in proc.stderr, proc.stderr
    assert "a real warning" in proc.stderr and "non-supported" not in proc.stderr


def test_stderr_lines_known_blocks_are_dropped_others_kept_in_order():
    real_error = "2026-12-05 07:31:24.5: E tensorflow/core/framework/op_kernel.cc:1] out of memory\n"
    broken = [*ATOMIC_DEL[:2], "RuntimeError: something else\n"]  # same start, another exception: kept whole
    int64 = (
        "2026-12-07 17:03:13.709952: E tensorflow/core/util/util.cc:131] oneDNN supports DT_INT64 only on platforms "
        "with AVX-512. Falling back to the default Eigen-based implementation if present.\n"
    )
    lines = [CUFFT, "first\n", *ATOMIC_DEL, int64, real_error, *broken, ATOMIC_DEL[0]]
    kept = [line.decode() for line in filtered(line.encode() for line in lines)]
    assert kept == ["first\n", real_error, *broken, ATOMIC_DEL[0]]  # an unfinished block at the end is kept


def test_the_relay_filters_descriptor_2_of_this_process_and_its_children():
    script = textwrap.dedent("""
        import os, subprocess, sys
        from torchtfx.pipeline.cli.stderr_relay import StderrRelay
        relay = StderrRelay()
        relay.start()
        os.write(2, os.environ["CUFFT"].encode())
        print("from python", file=sys.stderr)
        subprocess.run(["sh", "-c", 'printf "%s" "$CUFFT" >&2; echo from a child >&2'], check=True)
        relay.stop()
        print("after stop", file=sys.stderr)
    """)
    env = {**os.environ, "CUFFT": CUFFT}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "from python\nfrom a child\nafter stop\n"


def test_the_trainers_progress_line_in_a_long_epoch_reaches_a_default_runs_console(caplog):
    """The record EpochProgress itself logs (in-process training), not a copy of its text."""
    import torch

    from torchtfx.components.torch_trainer.worker.progress import EpochProgress

    clock = iter([0.0, 61.0])
    progress = EpochProgress(epoch=1, epochs=2, steps=700, rank=0, clock=lambda: next(clock))
    with caplog.at_level(logging.INFO, logger="torchtfx.train"):
        progress.step(30, torch.tensor([15.0, 960.0]))
    (record,) = caplog.records
    assert console.ConsoleFilter(progress_only=True).filter(record)
