"""The DDP worker processes torchrun starts: training loop, shards, model, metrics, rank 0's publish step."""
