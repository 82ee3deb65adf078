"""What a run produced, read back from ML Metadata: the console summary and the HTML report."""
