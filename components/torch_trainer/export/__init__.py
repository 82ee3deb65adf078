"""PyTorch -> ONNX -> TensorFlow: export and check, onnx2tf conversion into the serving SavedModel, parity."""
