"""Beam pipeline args for TFX's Beam components."""

from __future__ import annotations

BEAM_MODE_AUTO = "auto"
BEAM_MODES = (BEAM_MODE_AUTO, "in_memory", "multi_processing")
# Inputs below this run every Beam stage in the pipeline process (--direct_running_mode=in_memory).
SMALL_INPUT_BYTES = 32 * 2**20

# The flags through which Beam workers get their Python code. TFX checks for the same list
# (tfx.utils.dependency_utils.make_beam_dependency_flags).
DEPENDENCY_FLAGS = (
    "--extra_package",
    "--extra_packages",
    "--setup_file",
    "--requirements_file",
    "--sdk_container_image",
    "--worker_harness_container_image",
)


def with_dependency(beam_args: list[str], dependency_flag: str) -> list[str]:
    """``beam_args`` plus ``dependency_flag`` (``--setup_file=...`` or ``--sdk_container_image=...``)
    unless the user's args already say how workers get their code.

    Without one, every TFX Beam executor copies the whole TFX install into a fresh temp directory and
    builds an sdist of it (about 50 MB and several seconds per step), which is never removed: a local run
    left 300 MB behind in /tmp, and a test session filled the disk. DirectRunner ignores the flag; a
    remote runner (Dataflow, Flink) gets the project, whose requirements include TFX.
    """
    names = {arg.split("=", 1)[0] for arg in beam_args}
    if names & set(DEPENDENCY_FLAGS):
        return list(beam_args)
    if dependency_flag.split("=", 1)[0] not in DEPENDENCY_FLAGS:
        raise ValueError(f"{dependency_flag!r} is not a Beam dependency flag ({', '.join(DEPENDENCY_FLAGS)})")
    return [*beam_args, dependency_flag]
