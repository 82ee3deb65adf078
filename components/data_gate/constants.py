"""Artifact keys of the DataGate component."""

ANOMALIES_KEY = "anomalies"
STATISTICS_KEY = "statistics"  # of the new data
SCHEMA_KEY = "schema"
BASELINE_STATISTICS_KEY = "baseline_statistics"  # of the champion's training data; absent on a first run
SCHEMA_HINT_KEY = "schema_hint"
LABEL_CLASSES_KEY = "label_classes"  # a multiclass label's column and num_classes (label_classes.LabelClasses JSON)
ANOMALIES_FILE = "SchemaDiff.pb"  # what ExampleValidator writes per split
