"""The spans pattern checked without TFX, against TFX's own check (verify_split_pattern_specs and the width
check its glob makes) on the same patterns."""

from __future__ import annotations

import pytest
from tfx.components.example_gen import utils
from tfx.proto import example_gen_pb2

from torchtfx.data.spans.pattern import SpanPatternError, _specs, checked_pattern

PATTERNS = [
    "{SPAN}/*.csv",
    "span-{SPAN:3}/*.csv",
    "span-{SPAN}/v{VERSION}/*.csv",
    "span-{SPAN:2}/v{VERSION:2}/*.csv",
    "{YYYY}-{MM}-{DD}/*.csv",
    "{YYYY}{MM}{DD}/v{VERSION}/data-*.csv",
    "*.csv",
    "{SPAN}/{SPAN}/*.csv",
    "{SPAN}/{YYYY}-{MM}-{DD}/*.csv",
    "{YYYY}-{MM}/*.csv",
    "{YYYY}-{MM}-{DD}-{DD}/*.csv",
    "{VERSION}/*.csv",
    "{SPAN}/{VERSION}/{VERSION}/*.csv",
    "{SPAN:0}/*.csv",
    "{SPAN:x}/*.csv",
    "{SPAN}/{VERSION:-1}/*.csv",
]


def _tfx(pattern: str) -> tuple[bool, bool, bool] | str:
    split = example_gen_pb2.Input.Split(name="s", pattern=pattern)
    try:
        specs = utils.verify_split_pattern_specs(split)
        for regex, name, present in (
            (utils.SPAN_FULL_REGEX, "span", specs[0]),
            (utils.VERSION_FULL_REGEX, "v", specs[2]),
        ):
            if present:
                utils._get_spec_width(regex, name, split)
    except ValueError:
        return "refused"
    return specs


def _ours(pattern: str) -> tuple[bool, bool, bool] | str:
    try:
        return _specs(pattern)
    except SpanPatternError:
        return "refused"


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_specs_are_read_and_refused_as_tfx_reads_and_refuses_them(pattern):
    assert _ours(pattern) == _tfx(pattern)


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        ("*.csv", "has no {SPAN} and no {YYYY}-{MM}-{DD}"),
        ("/data/{SPAN}/*.csv", "must be relative to the data root"),
        ("../other/{SPAN}/*.csv", "stay inside it"),
        ("{SPAN}/../../*.csv", "no '..'"),
        ("{SPAN}/{YYYY}-{MM}-{DD}/*.csv", "has both {SPAN} and date specs"),
        ("{SPAN:0}/*.csv", "is not a positive integer"),
    ],
)
def test_a_pattern_tfx_cannot_read_or_that_leaves_the_root_is_refused_with_the_forms_that_work(pattern, named):
    with pytest.raises(SpanPatternError) as refused:
        checked_pattern(pattern)
    assert named in str(refused.value)
    assert "'{SPAN}/*.csv'" in str(refused.value)


def test_tfx_patterns_pass_unchanged():
    assert checked_pattern("span-{SPAN:3}/v{VERSION}/*.csv") == "span-{SPAN:3}/v{VERSION}/*.csv"
