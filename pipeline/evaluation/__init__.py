"""The Evaluator's (TFMA's) plug-ins: ``config`` (the EvalConfig with the gates), ``metrics`` (metrics from the
AUC's calibration histogram), ``histogram`` (its packed accumulators) and ``extractors`` (the batches trimmed
before TFMA splits them).

TFMA loads the metrics and the custom extractors by these dotted paths (in the Evaluator's Beam workers and the
Kubeflow step image): they are defined here, once, beside the modules they name (nothing else is imported here)."""

EVAL_METRICS_MODULE = f"{__name__}.metrics"  # the module of our metrics in the EvalConfig's metric specs
EVAL_EXTRACTORS_MODULE = f"{__name__}.extractors"  # its custom_extractors: TFMA's, trimmed
