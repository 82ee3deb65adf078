"""Data that arrives in spans (a folder a day, ``span-{SPAN}``, ``{YYYY}-{MM}-{DD}``) read with TFX's own span and
version semantics: which spans a data root holds, each span's newest version, and the window a run trains on."""
