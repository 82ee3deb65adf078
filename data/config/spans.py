"""The ``spans:`` section: data that arrives in spans under the data root (a folder a day), and the window of
spans a run trains on (data/spans/)."""

from __future__ import annotations

import pydantic

from torchtfx.data.config.strict import ConfigError, StrictConfig, whole_number
from torchtfx.data.spans.pattern import checked_pattern

# The most spans one run trains on: a year of daily spans. Each span's files are checked and read by ExampleGen.
WindowSize = whole_number(1, 366)


class SpanConfigError(ConfigError):
    """The dataset YAML's spans: section is malformed: a config-file error."""


class SpanConfig(StrictConfig):
    config_error = SpanConfigError

    # The files of one span, relative to the data root, in TFX's syntax: '{SPAN}/*.csv', 'span-{SPAN:3}/*.csv',
    # '{YYYY}-{MM}-{DD}/*.csv', with an optional '{VERSION}' (each span read at its newest version).
    pattern: str
    # The newest spans the candidate trains on; the newest span alone is held out to evaluate it and the champion.
    window: WindowSize = 7

    @pydantic.field_validator("pattern")
    @classmethod
    def _tfx_pattern(cls, pattern: str) -> str:
        return checked_pattern(pattern)
