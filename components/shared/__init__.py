"""What several components share: contracts, MLflow access, the TF Serving layout, run identity, artifact URIs."""
