"""The pipeline: the DAG (``pipeline.create_pipeline``) and its stages (``transform``, ``evaluation``), settings,
runners, CLI, reporting."""
