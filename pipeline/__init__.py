"""The pipeline: its definition (``create_pipeline``, preprocessing, TFMA config), runners, CLI, reporting."""
