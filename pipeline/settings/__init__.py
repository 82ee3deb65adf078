"""Settings: every user-facing setting declared once (``declared``), read from the command line, ``pools.yaml``
and the dataset YAML (``layers``), resolved in one place with its source (``resolve``), printed by
``torchtfx config show`` (``show``), and bound to one environment for ``create_pipeline`` (``bound``)."""
