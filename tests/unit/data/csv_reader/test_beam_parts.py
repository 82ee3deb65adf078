"""How many parts ExampleGen cuts its input into: the Beam workers the runner args start."""

from __future__ import annotations

from torchtfx.data.csv_reader.beam_parts import beam_workers


def test_beam_workers_read_from_the_runner_args():
    assert beam_workers([]) == 1  # the DirectRunner's default mode, in_memory: one worker
    assert beam_workers(["--direct_running_mode=in_memory", "--direct_num_workers=4"]) == 1
    assert beam_workers(["--direct_running_mode=multi_processing", "--direct_num_workers=2"]) == 2
    assert beam_workers(["--direct_running_mode=multi_processing", "--direct_num_workers=0"]) >= 1  # one per CPU
    assert beam_workers(["--runner=DataflowRunner", "--num_workers=8"]) == 8
    assert beam_workers(["--runner=FlinkRunner"]) == 1  # the runner decides; parts of PART_BYTES still spread it
