"""Options that more than one command takes, declared once: the Beam DirectRunner's mode and worker count
(``torchtfx run`` and ``torchtfx predict``), from the settings' declarations (pipeline/settings/declared.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from torchtfx.pipeline.cli.setting_options import declared_option
from torchtfx.pipeline.settings.beam_args import BeamSettings

Command = TypeVar("Command", bound=Callable)


def direct_runner_options(command: Command) -> Command:
    """``--beam-workers`` and ``--beam-mode``: where the DirectRunner runs the Beam work."""
    command = declared_option("beam.mode", "beam_mode")(command)
    return declared_option("beam.workers", "beam_workers")(command)


def checked_direct_runner(beam_mode: str, beam_workers: int) -> BeamSettings:
    """The two options' values checked by the declared setting's bounds, as ``torchtfx run`` checks them (a
    refusal names ``beam.workers (command line: --beam-workers)`` and the range): ``predict`` reads no config
    layers, so its values never passed the resolver."""
    from torchtfx.pipeline.settings.declared import BY_KEY, LOCAL
    from torchtfx.pipeline.settings.resolve import Resolved, ResolvedSettings

    values = {
        key: Resolved(value, f"command line: {BY_KEY[key].option.flag}")  # type: ignore[union-attr]
        for key, value in (("beam.mode", beam_mode), ("beam.workers", beam_workers))
    }
    return ResolvedSettings(run=LOCAL, values=values, loaded_dataset=None).beam  # type: ignore[arg-type]
