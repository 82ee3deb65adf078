"""Options that more than one command takes, declared once: the Beam DirectRunner's mode and worker count
(``torchtfx run`` and ``torchtfx predict``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from torchtfx.pipeline.beam_args import BEAM_MODE_AUTO, BEAM_MODES

Command = TypeVar("Command", bound=Callable)


def direct_runner_options(command: Command) -> Command:
    """``--beam-workers`` and ``--beam-mode``: where the DirectRunner runs the Beam work."""
    command = click.option(
        "--beam-mode",
        type=click.Choice(BEAM_MODES),
        default=BEAM_MODE_AUTO,
        show_default=True,
        help="Beam DirectRunner: in_memory (one process), multi_processing, or auto (in_memory below 32 MiB of CSV).",
    )(command)
    return click.option(
        "--beam-workers",
        type=click.IntRange(min=1),
        default=2,
        show_default=True,
        help="Beam DirectRunner processes (multi_processing).",
    )(command)
