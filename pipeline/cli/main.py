"""The ``torchtfx`` command line: ``run``, ``draft-schema``, ``promote``, ``report``, ``compile`` and
``submit``."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path

import click

from torchtfx.components.shared.mlflow_client import (
    FAIL_IF_UNREACHABLE,
    UNREACHABLE_POLICIES,
    RedactCredentials,
    redact,
)
from torchtfx.components.torch_trainer.hparams import TrainerHParams
from torchtfx.data.config.dataset import load_dataset_config
from torchtfx.data.config.missing import DEFAULT_MISSING_VALUES, checked_markers
from torchtfx.data.config.serving import PRECISIONS
from torchtfx.pipeline.cli import console
from torchtfx.pipeline.cli.errors import REJECTED_EXIT_CODE, reports_errors
from torchtfx.pipeline.cli.options import direct_runner_options
from torchtfx.pipeline.cli.stderr_relay import StderrRelay

logger = logging.getLogger("torchtfx")


class _AutoOrInt(click.ParamType):
    """``auto`` or a whole number (range checks are the hyperparameters' own)."""

    name = "auto|N"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value == "auto":
            return value
        try:
            return int(value)
        except ValueError:
            self.fail(f"{value!r} is neither 'auto' nor a whole number", param, ctx)


AUTO_OR_INT = _AutoOrInt()
_OWN_LOGGERS = ("torchtfx",)  # every module logs under torchtfx.*: __name__, or "torchtfx.train" in the DDP workers


def _configure_logging(verbose: bool) -> None:
    """INFO from every logger with -v; else the quiet console of pipeline/cli/console.py."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for handler in logging.getLogger().handlers:  # no user:password@ or token= in any line, MLflow's own included
        handler.addFilter(RedactCredentials())
    for name in _OWN_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.INFO)
    logging.getLogger("absl").setLevel(logging.INFO)  # TFX's stage lines; the console filter keeps those alone
    console.configure(verbose)


def _print_version(context: click.Context, _param: click.Parameter, value: bool) -> None:
    """The project and the stack a bug report needs, from the installed distributions (nothing is imported)."""
    if not value or context.resilient_parsing:
        return
    from importlib import metadata

    stack = []
    for dist in ("tfx", "tensorflow", "torch", "onnx2tf", "mlflow"):
        try:
            stack.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            stack.append(f"{dist} not installed")
    python = ".".join(map(str, sys.version_info[:3]))
    click.echo(f"torchtfx {metadata.version('torchtfx')} ({', '.join(stack)}; Python {python})")
    context.exit()


@click.group()
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version of torchtfx and of its stack, and exit.")  # fmt: skip
@click.option(
    "-v", "--verbose", is_flag=True, help="Show every log line and warning, TFX/Beam INFO included, and tracebacks."
)
@click.pass_context
def cli(context: click.Context, verbose: bool) -> None:
    """torchtfx: research in PyTorch, production in TensorFlow, ONNX in between."""
    _configure_logging(verbose)
    if not verbose and isinstance(context.obj, StderrRelay):  # main() passes one; a CliRunner test does not
        context.obj.start()


@cli.command()
@click.option(
    "--dataset",
    default="taxi",
    show_default=True,
    help="Name under data/datasets/ or a YAML path.",
)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    help="Folder of CSV files [default: packaged data].",
)
@click.option(
    "--pipeline-root",
    type=click.Path(path_type=Path),
    default=Path("runs/local"),
    show_default=True,
)
@click.option(
    "--serving-dir",
    type=click.Path(path_type=Path),
    help="[default: <root>/serving/<dataset>]",
)
@click.option("--auc-threshold", type=float, help="AUC floor [default: the dataset's gates, else 0.75].")
@click.option("--max-auc-drop", type=float, help="Allowed AUC drop vs the champion [default: 0.01].")
@click.option("--epochs", type=int, default=TrainerHParams.default_of("epochs"), show_default=True)
@click.option("--batch-size", type=int, default=TrainerHParams.default_of("batch_size"), show_default=True)
@click.option("--learning-rate", type=float, default=TrainerHParams.default_of("learning_rate"), show_default=True)
@click.option("--seed", type=int, default=TrainerHParams.default_of("seed"), show_default=True)
@click.option(
    "--num-workers",
    type=AUTO_OR_INT,
    default=TrainerHParams.default_of("num_workers"),
    show_default=True,
    help="DDP processes; auto: one worker in the pipeline's own process below 50,000 training rows, else one per "
    "GPU, or 2 on CPU.",
)
@click.option(
    "--sync-every",
    type=AUTO_OR_INT,
    default=TrainerHParams.default_of("sync_every"),
    show_default=True,
    help="DDP: 1 all-reduces gradients every step; N > 1 averages parameters every N steps (local SGD); auto: 1 "
    "on GPUs, 16 on CPU.",
)
@click.option(
    "--max-restarts",
    type=click.IntRange(min=0),
    default=TrainerHParams.default_of("max_restarts"),
    show_default=True,
    help="DDP: how many times torchrun restarts the workers after one dies; they resume from the last checkpoint.",
)
@click.option(
    "--model",
    "model_factory",
    help="Model factory: mlp, resnet, dcn, ft_transformer, with text features text_transformer, text_moe, text_cnn; "
    "package.module:function or path/to/file.py:function "
    "[default: the dataset YAML's model, else mlp].",
)
@click.option(
    "--model-hparam",
    "model_hparams",
    multiple=True,
    metavar="KEY=VALUE",
    help="A model hyperparameter, value read as YAML (repeatable): --model-hparam dropout=0.2.",
)
@click.option("--detect-anomaly", is_flag=True, help="torch.autograd anomaly detection: name the op where NaN appears.")
@click.option(
    "--serving-precision",
    type=click.Choice(PRECISIONS),
    help="Serve a reduced-precision network if the drift gate passes it (fp16) [default: the dataset YAML's "
    "serving.precision, else fp32].",
)
@click.option(
    "--serving-address",
    metavar="HOST:PORT",
    help="TF Serving's gRPC address: labels move only once it reports the new version AVAILABLE [default: none; "
    "the label move waits for `torchtfx promote --finish`].",
)
@click.option("--no-cache", is_flag=True, help="Disable MLMD execution caching.")
@click.option(
    "--mlflow-unreachable",
    type=click.Choice(UNREACHABLE_POLICIES),
    default=FAIL_IF_UNREACHABLE,
    show_default=True,
    help="If the MLflow server does not answer: fail before training, or continue untracked (no promotion).",
)
@direct_runner_options
@reports_errors(stage_prefix="pipeline run failed: ")
def run(
    dataset,
    data_dir,
    pipeline_root,
    serving_dir,
    auc_threshold,
    max_auc_drop,
    epochs,
    batch_size,
    learning_rate,
    seed,
    num_workers,
    sync_every,
    max_restarts,
    beam_workers,
    beam_mode,
    model_factory,
    model_hparams,
    detect_anomaly,
    serving_precision,
    serving_address,
    no_cache,
    mlflow_unreachable,
):
    """Run the whole pipeline locally (LocalDagRunner + Beam DirectRunner)."""
    from torchtfx.pipeline.local.runner import LocalSettings, run_local
    from torchtfx.pipeline.model_choice import choose_model, parse_model_hparams
    from torchtfx.pipeline.reporting.console import print_run_report

    console.show_progress_only()  # stage lines, one progress line per long stage, warnings; no-op with -v
    options = dict(epochs=epochs, batch_size=batch_size, learning_rate=learning_rate, seed=seed,
                   num_workers=num_workers, sync_every=sync_every, max_restarts=max_restarts,
                   detect_anomaly=detect_anomaly)  # fmt: skip
    hparams = TrainerHParams.parse(options, "trainer options (--epochs, --batch-size, ...)")
    dataset_cfg = load_dataset_config(dataset)
    # Through the dataset config, so that a binary-only override on another task is refused by name.
    gates = dataset_cfg.gates.with_overrides(auc_floor=auc_threshold, max_auc_drop=max_auc_drop)
    dataset_cfg = dataset_cfg.replace(gates=gates) if gates is not dataset_cfg.gates else dataset_cfg
    hparams = choose_model(dataset_cfg, hparams, model_factory, parse_model_hparams(model_hparams),
                           serving_precision=serving_precision)  # fmt: skip
    settings = LocalSettings(
        dataset=dataset_cfg,
        pipeline_root=pipeline_root,
        data_dir=data_dir,
        serving_dir=serving_dir,
        hparams=hparams,
        gates=dataset_cfg.gates,
        beam_workers=beam_workers,
        beam_mode=beam_mode,
        serving_address=serving_address,
        enable_cache=not no_cache,
        mlflow_unreachable=mlflow_unreachable,
    )
    summary, wall = run_local(settings)
    if not print_run_report(summary, wall, settings):
        raise click.exceptions.Exit(REJECTED_EXIT_CODE)


@cli.command("draft-schema")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    required=True,
    help="Folder of CSV files.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="Where to write schema.pbtxt.",
)
@click.option(
    "--missing-value",
    "missing_values",
    multiple=True,
    default=DEFAULT_MISSING_VALUES,
    show_default=True,
    help="Text that means 'no value' in a numeric column (repeat it; giving any replaces the default list). "
    "List the same under missing_values in the dataset config: ExampleGen reads the CSV with that list.",
)
@reports_errors()
def draft_schema_cmd(data_dir: Path, out: Path, missing_values: tuple[str, ...]) -> None:
    """Draft a schema (types, presence, domains, value ranges) from CSV data, to curate by hand."""
    from torchtfx.data.schema_draft import draft_schema, write_schema

    try:
        markers = checked_markers(missing_values)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--missing-value") from None
    write_schema(draft_schema(data_dir, markers), out)
    click.echo(f"Draft schema written to {out}; review presence, domains and ranges before committing it.")


def _register_subcommands() -> None:
    from torchtfx.pipeline.cli.convert import convert_cmd
    from torchtfx.pipeline.cli.kubeflow import compile_cmd, submit_cmd
    from torchtfx.pipeline.cli.predict import predict_cmd
    from torchtfx.pipeline.cli.promotion import promote, report

    cli.add_command(promote)
    cli.add_command(report)
    cli.add_command(compile_cmd)
    cli.add_command(submit_cmd)
    cli.add_command(convert_cmd)
    cli.add_command(predict_cmd)


_register_subcommands()


def main() -> None:
    # TFT and onnx2tf build tf_keras (Keras 2) models; TF 2.16 would otherwise hand out Keras 3.
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    relay = StderrRelay()  # cli() starts it unless -v: TF's C++ lines and the Beam workers' stderr, filtered
    # TFX's Beam executors parse sys.argv again with absl's flags (base_beam_executor.py:94), where -v is
    # --verbosity: `torchtfx -v run` stopped in CsvExampleGen on "flag --verbosity=run". Click alone reads them.
    args, sys.argv = sys.argv[1:], sys.argv[:1]
    try:
        cli(args=args, prog_name="torchtfx", obj=relay)
        code = 0
    except SystemExit as done:  # click ends every command this way, success included
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except Exception:  # only with -v: reports_errors turns the rest into one-line errors
        sys.stderr.write(redact(traceback.format_exc()))
        code = 1
    finally:  # Ctrl-C included: its traceback goes to the restored stderr
        sys.stdout.flush()
        logging.shutdown()
        relay.stop()
    # Everything is persisted by now (MLMD, MLflow, artifacts). Skip interpreter teardown: TF's
    # AtomicFunction.__del__ runs after its modules are gone and prints dozens of harmless tracebacks.
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
