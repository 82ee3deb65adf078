"""The local runner: LocalDagRunner, Beam DirectRunner, sqlite ML Metadata and MLflow under the pipeline root."""
