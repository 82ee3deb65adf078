"""Names both sides of the process seam use: the modules the executor starts (the agent, the workers) and the files
of a run directory the workers write and the executor reads."""

# The DDP worker's module: forked by the local agent (AGENT_MODULE), started by torchrun inside each PyTorchJob replica.
WORKER_MODULE = "torchtfx.components.torch_trainer.worker.train"
# The local DDP agent, which forks the workers (cluster/agent.py); multi-node pods run torchrun with WORKER_MODULE.
AGENT_MODULE = "torchtfx.components.torch_trainer.cluster.agent"
# What the agent names each forked worker, followed by its rank (ps, top): its command line is the agent's.
WORKER_PROCESS_NAME = "ddp-rank"
# Files of a run directory written by the workers and read by the executor (besides those in contracts):
# rank 0's summary of its last checkpoint (kept with the log after a failure), and the marker of a failure that
# restarting the workers would repeat (worker/fatal.py).
CHECKPOINT_META_FILE = "checkpoint.json"
FATAL_FILE = "fatal_error.txt"
