"""Artifact keys of the DataGate component."""

ANOMALIES_KEY = "anomalies"
STATISTICS_KEY = "statistics"  # of the new data
SCHEMA_KEY = "schema"
BASELINE_STATISTICS_KEY = "baseline_statistics"  # of the champion's training data; absent on a first run
SCHEMA_HINT_KEY = "schema_hint"
# A dataset of spans: the split that holds the newest span alone (its eval split; the train split is the window).
# The new data compared with the champion's training data is that split, and it is compared with the window too.
NEWEST_SPAN_SPLIT_KEY = "newest_span_split"
LABEL_CLASSES_KEY = "label_classes"  # a multiclass label's column and num_classes (label_classes.LabelClasses JSON)
ANOMALIES_FILE = "SchemaDiff.pb"  # what ExampleValidator writes per split
