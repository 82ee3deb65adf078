"""``torchtfx monitor``: what the server is asked, against what the champion learned (skew) and against the
previous monitoring window (drift), by TFDV and the curated schema's comparators; a report that names the
features that moved, and an exit code a scheduler can start a run on."""
