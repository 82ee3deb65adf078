"""Transform's module code: ``preprocessing`` (TFX Transform's ``preprocessing_fn``, driven by the DatasetConfig)
and ``text_features`` (token ids and length buckets of the text features).

TFX's Transform, its Beam workers and the Kubeflow step image import the function by the dotted path below: it is
defined here, once, beside the module it names (nothing else is imported here, so reading it costs nothing)."""

PREPROCESSING_FN = f"{__name__}.preprocessing.preprocessing_fn"
