"""How the checked input files are cut into parts for the Beam workers (parts.py): one part per worker at least,
so that each worker writes a shard of each split and every later stage reads the split in parallel."""

from __future__ import annotations

import logging
import os

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions, WorkerOptions

from torchtfx.data.csv_reader.parts import CsvPart, CutPoints, cut, part_count

logger = logging.getLogger(__name__)

# The largest part of an input file that one Beam worker reads (parts.py): a remote runner gets one part per this
# many bytes at least, the DirectRunner one part per worker at least.
PART_BYTES = 64 * 2**20

_DIRECT_RUNNERS = (None, "DirectRunner", "BundleBasedDirectRunner", "FnApiRunner", "SwitchingDirectRunner")


def beam_workers(beam_args: list[str]) -> int:
    """The Beam workers ``beam_args`` start where they say: the DirectRunner's worker count (0: one per CPU; one
    in its in_memory mode), a remote runner's ``--num_workers``; otherwise 1 (the runner decides, and parts of
    PART_BYTES still spread the work)."""
    options = PipelineOptions(beam_args)
    if options.view_as(StandardOptions).runner in _DIRECT_RUNNERS:
        direct = options.view_as(DirectOptions)
        if direct.direct_running_mode == "in_memory":
            return 1
        return direct.direct_num_workers or os.cpu_count() or 1
    return options.view_as(WorkerOptions).num_workers or 1


def input_parts(cut_points: dict[str, tuple[list[str], CutPoints]], beam_args: list[str]) -> list[CsvPart]:
    """Every checked file of one input split, cut into parts (see the module's docstring)."""
    paths = list(cut_points)
    workers = beam_workers(beam_args)
    counts = part_count([cut_points[p][1].size for p in paths], workers, PART_BYTES)
    parts = [part for path, n in zip(paths, counts, strict=True) for part in cut(path, *cut_points[path], n)]
    logger.info("Reading %s input file(s) in %s part(s) for %s Beam worker(s)", len(paths), len(parts), workers)
    return parts
