"""CsvExampleGen's own keys and settings (the component id is components/shared/contracts.py:EXAMPLE_GEN_ID)."""

# In the component's custom_config (a google.protobuf.Struct): the curated schema whose types decode the CSV.
SCHEMA_FILE_KEY = "schema_file"
# ... and the text read as a missing value in a numeric column (the dataset config's missing_values); absent: the
# default list (data/config/missing.py).
MISSING_VALUES_KEY = "missing_values"
# ... and the most characters one cell may hold (the dataset config's max_cell_chars); absent: its default, so the
# component's properties (and the compiled Kubeflow spec) stay as they were for a dataset that keeps the default.
MAX_CELL_CHARS_KEY = "max_cell_chars"
# ... and the fraction of rows kept (the dataset config's sample); absent: every row.
SAMPLE_KEY = "sample"
# ... and, for a data root of spans (the dataset config's spans:), the spans pattern as written (the driver fills
# the input split's pattern with the newest span) and the window: how many of the newest spans are read.
SPAN_PATTERN_KEY = "span_pattern"
SPAN_WINDOW_KEY = "span_window"
# ... and where each span's examples are kept for later runs (span_store.py); absent: each run reads every span.
SPAN_STORE_KEY = "span_store"
# On the Examples artifact: the spans read, oldest first ("20425,20426"); the artifact's own span is the newest.
WINDOW_SPANS_PROPERTY = "window_spans"
