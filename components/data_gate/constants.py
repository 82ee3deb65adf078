"""Artifact keys of the DataGate component."""

ANOMALIES_KEY = "anomalies"
SCHEMA_HINT_KEY = "schema_hint"
ANOMALIES_FILE = "SchemaDiff.pb"  # what ExampleValidator writes per split
