"""A rerun removes the staging folders whose run has ended and keeps those of a run still going (real flock;
a run that ended is one whose lock was released, as the kernel releases a SIGKILLed process's)."""

from __future__ import annotations

import subprocess
import sys

from torchtfx.pipeline.predict.staging import OWNER_FILE, claim, remove_stale, staging_name


def test_only_the_staging_folders_of_ended_runs_are_removed(tmp_path):
    out = str(tmp_path / "scores.csv")
    running = claim(str(tmp_path / staging_name("scores.csv", "live")))
    ended = claim(str(tmp_path / staging_name("scores.csv", "dead")))
    (tmp_path / staging_name("scores.csv", "dead") / "part-0.csv").write_text("half a file")
    ended.close()
    (tmp_path / staging_name("scores.csv", "noowner")).mkdir()  # not made by an owner: not ours to judge
    other = claim(str(tmp_path / staging_name("other.csv", "dead")))
    other.close()
    try:
        assert remove_stale(out) == [str(tmp_path / staging_name("scores.csv", "dead"))]
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            staging_name("other.csv", "dead"),
            staging_name("scores.csv", "live"),
            staging_name("scores.csv", "noowner"),
        ]
        assert "torchtfx predict, pid " in (tmp_path / staging_name("scores.csv", "live") / OWNER_FILE).read_text()
    finally:
        running.close()
    assert remove_stale(out) == [str(tmp_path / staging_name("scores.csv", "live"))]


def test_a_folder_owned_by_another_live_process_is_kept_until_it_is_killed(tmp_path):
    staging = tmp_path / staging_name("scores.csv", "other")
    code = "import sys, time; from torchtfx.pipeline.predict.staging import claim; h = claim(sys.argv[1]); "
    code += "print('claimed', flush=True); time.sleep(600)"
    owner = subprocess.Popen([sys.executable, "-c", code, str(staging)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "claimed"
        assert remove_stale(str(tmp_path / "scores.csv")) == [] and staging.is_dir()
    finally:
        owner.kill()  # SIGKILL: the kernel releases its lock
        owner.wait()
    assert remove_stale(str(tmp_path / "scores.csv")) == [str(staging)] and not staging.exists()
