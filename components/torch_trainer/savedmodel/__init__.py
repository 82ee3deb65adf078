"""The executor's side after training: ONNX -> serving SavedModel with the TFT graph, and its gates (parity, precision,
routing, batch sweep), warmup requests and the MLflow Model."""
