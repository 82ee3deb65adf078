"""Where training runs: torchrun on this machine, or a Kubeflow PyTorchJob across nodes."""
