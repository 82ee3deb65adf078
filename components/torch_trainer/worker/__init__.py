"""The DDP worker processes torchrun starts: training loop, batches, metrics, rank 0's publish step."""
