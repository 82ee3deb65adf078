"""What the command line treats as the user's mistake (a message, no traceback) and its exit codes.

Its own module, so that every command group imports it and none imports another group."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TypeVar

import click

from torchtfx.components.promoter.public import PromotionError
from torchtfx.components.shared.mlflow_client import RegistryVersionNotFoundError, TrackingUnavailableError, redact
from torchtfx.components.stage_failure import StageFailure
from torchtfx.components.tf_serving.errors import ServingConfigError
from torchtfx.data.config.strict import ConfigError
from torchtfx.data.csv_reader.sources import DataSourceError
from torchtfx.pipeline.cli.known_errors import known_failure

# Errors whose message already tells the user what is wrong and what to do: no traceback. Every config
# family's error is a ConfigError (dataset, gates, hyperparameters, batching, Kubeflow, PyTorchJob, local).
USER_ERRORS = (
    ConfigError,
    DataSourceError,
    PromotionError,
    RegistryVersionNotFoundError,
    ServingConfigError,
    TrackingUnavailableError,
)
# A pipeline stage that stopped the run on purpose, with a message meant for the user: every stage's error is a
# StageFailure (components/stage_failure.py). The converter is a library of its own that imports nothing
# of ours, so its error is named here instead, by module and name: importing it would import TensorFlow at the
# CLI's start, and an error's class is always imported once it has been raised.
LIBRARY_FAILURES = (("torchtfx.components.converter.translator", "ConversionError"),)
# Exit code of `torchtfx run` when the candidate was evaluated and rejected by a gate.
REJECTED_EXIT_CODE = 3
# Exit code of `torchtfx run` refused at its start because another run holds the pipeline root.
BUSY_EXIT_CODE = 4
# Exit code of `torchtfx monitor` when a served feature moved from the training data or the previous window (or
# broke the schema): a scheduler starts a run on it.
MOVED_EXIT_CODE = 5
UNEXPECTED_HINT = (
    "This is not an input problem torchtfx knows how to name, so it may be a bug: rerun with -v "
    "(`torchtfx -v ...`) to see the traceback, and include it when you report the problem."
)

Command = TypeVar("Command", bound=Callable)


class BusyError(click.ClickException):
    """Another run holds the pipeline root: refused at once, with the holder named."""

    exit_code = BUSY_EXIT_CODE


def is_stage_failure(err: BaseException) -> bool:
    if isinstance(err, StageFailure):
        return True
    for module, name in LIBRARY_FAILURES:
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(err, cls):
            return True
    return False


def _verbose() -> bool:
    context = click.get_current_context(silent=True)
    return bool(context and context.find_root().params.get("verbose"))


def reports_errors(stage_prefix: str = "") -> Callable[[Command], Command]:
    """Turn a command's exceptions into what the user should see: the message of a known input or stage
    error (``stage_prefix`` before a stage's), a library's failure torchtfx recognises named with its stage and
    fix (known_errors.py), and for anything else, a one-line error that says it may be a bug, or with ``-v`` the
    traceback itself."""

    def decorate(command: Command) -> Command:
        @functools.wraps(command)
        def wrapper(*args, **kwargs):
            try:
                return command(*args, **kwargs)
            except (click.ClickException, click.exceptions.Exit, click.Abort):
                raise
            except USER_ERRORS as err:
                raise click.ClickException(redact(str(err))) from err
            except Exception as err:
                if is_stage_failure(err):
                    raise click.ClickException(redact(f"{stage_prefix}{err}")) from err
                if _verbose():
                    raise  # main() prints the traceback
                known = known_failure(err)  # a library's error torchtfx can name (stage, cause, fix)
                if known:
                    raise click.ClickException(redact(f"{stage_prefix}{known}")) from err
                message = redact(f"unexpected {type(err).__name__}: {err}")  # MLflow's errors name the URL they called
                raise click.ClickException(f"{message}\n{UNEXPECTED_HINT}") from err

        return wrapper  # type: ignore[return-value]

    return decorate
