"""Batch scoring (``torchtfx predict``): CSV files checked and encoded as ExampleGen does
(data/csv_reader/), scored on Beam by a served model version through its ``serving_default`` signature, written
as CSV or Parquet, atomically.

- :mod:`.served`: which SavedModel scores (the registry's alias or version, in the Promoter's serving layout);
- :mod:`.source`: the input files and their checks, before any Beam work;
- :mod:`.outputs`: the columns written (key columns, then the task's outputs) and their formats;
- :mod:`.inference`: the Beam pipeline (each part scored a chunk of rows per ``serving_default`` call);
- :mod:`.writer`: the temporary output and its rename into place;
- :mod:`.run`: the whole command, in that order.
"""
