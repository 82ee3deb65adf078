"""The schema-typed CSV -> tf.Example core, used by ExampleGen (components/csv_input/) and by ``torchtfx predict``:
the input's files (files.py), their records read and checked (sources.py, problems.py, check.py), typed by the
curated schema (columns.py, decode.py), and cut into parts for the Beam workers (parts.py, beam_parts.py)."""
