"""Options that more than one command takes, declared once: the Beam DirectRunner's mode and worker count
(``torchtfx run`` and ``torchtfx predict``), from the settings' declarations (pipeline/settings/declared.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from torchtfx.pipeline.cli.setting_options import declared_option

Command = TypeVar("Command", bound=Callable)


def direct_runner_options(command: Command) -> Command:
    """``--beam-workers`` and ``--beam-mode``: where the DirectRunner runs the Beam work."""
    command = declared_option("beam.mode", "beam_mode")(command)
    return declared_option("beam.workers", "beam_workers")(command)
