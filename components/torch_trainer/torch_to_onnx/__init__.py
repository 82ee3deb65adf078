"""PyTorch -> ONNX inside the DDP worker: export (TorchScript, uniform symbolics, dynamo fallback), shape checks."""
