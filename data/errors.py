"""The base of every config error, in a module of its own so that data/config/ and data/pretrained/ (which
data/config/text.py reads) can both derive from it without importing each other."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config is malformed; the message names the source, the key path and what is allowed."""
