"""The ``torchtfx`` command line: ``main`` (run, draft-schema), the ``kubeflow`` and ``promotion`` groups."""
