"""TorchTrainer: DDP training of the PyTorch model, ONNX export, conversion to a TF SavedModel, parity gate."""
