"""Kubeflow Pipelines: the deployment config (pools.yaml), compile, submit, and the entry point of each step."""
