"""The ``torchtfx`` command line: ``run``, ``draft-schema``, ``promote``, ``report``, ``compile`` and
``submit``."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path

import click

from torchtfx.components.shared.mlflow_client import RedactCredentials, redact
from torchtfx.data.config.dataset import MAX_CELL_CHARS, MAX_CELL_CHARS_RANGE
from torchtfx.data.config.missing import DEFAULT_MISSING_VALUES, checked_markers
from torchtfx.pipeline.cli import console
from torchtfx.pipeline.cli.errors import REJECTED_EXIT_CODE, BusyError, reports_errors
from torchtfx.pipeline.cli.setting_options import given_settings, setting_options
from torchtfx.pipeline.cli.stderr_relay import StderrRelay
from torchtfx.pipeline.settings.declared import LOCAL

logger = logging.getLogger("torchtfx")


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
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version of torchtfx and of its stack, and exit.",
)
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
@setting_options(LOCAL)
@reports_errors(stage_prefix="pipeline run failed: ")
def run(**_options) -> None:
    """Run the whole pipeline locally (LocalDagRunner + Beam DirectRunner). Each setting is the option's, else
    the dataset YAML's, else the default (`torchtfx config show` lists them with their sources)."""
    from torchtfx.pipeline.local.interrupt import on_interrupt
    from torchtfx.pipeline.local.run_lock import RootBusyError
    from torchtfx.pipeline.local.runner import LocalSettings, run_local
    from torchtfx.pipeline.reporting.console import print_run_report
    from torchtfx.pipeline.settings.resolve import resolve_settings

    console.show_progress_only()  # stage lines, one progress line per long stage, warnings; no-op with -v
    context = click.get_current_context()
    resolved = resolve_settings(LOCAL, given_settings(context, LOCAL))
    settings = LocalSettings.from_resolved(resolved)
    relay = context.find_root().obj
    on_interrupt(settings.enable_cache, relay.stop if isinstance(relay, StderrRelay) else None)
    try:
        summary, wall = run_local(settings)
    except RootBusyError as err:
        raise BusyError(str(err)) from None
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
@click.option(
    "--max-cell-chars",
    type=click.IntRange(*MAX_CELL_CHARS_RANGE),
    default=MAX_CELL_CHARS,
    show_default=True,
    help="The most characters one CSV cell may hold (max_cell_chars in the dataset config, for ExampleGen).",
)
@reports_errors()
def draft_schema_cmd(data_dir: Path, out: Path, missing_values: tuple[str, ...], max_cell_chars: int) -> None:
    """Draft a schema (types, presence, domains, value ranges) from CSV data, to curate by hand."""
    from torchtfx.data.schema_draft import draft_schema, write_schema

    try:
        markers = checked_markers(missing_values)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--missing-value") from None
    write_schema(draft_schema(data_dir, markers, max_cell_chars), out)
    click.echo(f"Draft schema written to {out}; review presence, domains and ranges before committing it.")


def _register_subcommands() -> None:
    from torchtfx.pipeline.cli.convert import convert_cmd
    from torchtfx.pipeline.cli.kubeflow import compile_cmd, submit_cmd
    from torchtfx.pipeline.cli.monitor import monitor_cmd
    from torchtfx.pipeline.cli.predict import predict_cmd
    from torchtfx.pipeline.cli.promotion import promote, report
    from torchtfx.pipeline.cli.settings import config_group

    cli.add_command(promote)
    cli.add_command(report)
    cli.add_command(compile_cmd)
    cli.add_command(submit_cmd)
    cli.add_command(convert_cmd)
    cli.add_command(predict_cmd)
    cli.add_command(monitor_cmd)
    cli.add_command(config_group)


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
