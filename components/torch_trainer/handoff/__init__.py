"""The executor-to-worker contract: the job file, the array files and their splits, padding, the shared constants and
hyperparameters, and the error a failed training raises."""
