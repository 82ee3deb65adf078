"""The curated schemas, one ``<dataset>/schema.pbtxt`` per shipped dataset: package data of ``torchtfx.schema``
(setup.py), read through ``torchtfx.data.resources``. No code lives here."""
