"""What a WordPiece tokenizer does to each character before it looks words up, as tables the TF graph can apply.

BERT's normalizer (``BertNormalizer``: control characters removed, whitespace to a space, CJK characters spaced,
NFD with the nonspacing marks removed, lower case) and pre-tokenizer (``BertPreTokenizer``: split at whitespace,
each punctuation character a word of its own) act on each character alone: lower case is per character in
``tokenizers`` (Rust's ``char::to_lowercase``, no final-sigma rule), and NFD decomposes each character alone (the
canonical reordering of marks that follows it only matters among marks, which are removed). So the two are one
function of the character, which :func:`character_table` reads off the checkpoint's own ``tokenizers`` objects for
every codepoint, instead of reimplementing Unicode's categories (whose version differs between ``tokenizers``, RE2
and ICU): exact by construction for the installed ``tokenizers``.

Each character becomes one of: itself, nothing, a space, itself between spaces (a word of its own), or another
string (``É`` -> ``e``, a Hangul syllable -> its jamo). The first four are ranges of codepoints (``KIND_*``, found
with a binary search in the graph); the last, 14,320 characters for BERT's uncased normalizer, a hash table.

Added tokens (``[CLS]``, ``[MASK]``, ...) are matched in the raw text before normalization, as ``tokenizers`` does;
the graph replaces each with a private-use sentinel character (:data:`SENTINEL_BASE` + its index), which the table
keeps as a word of its own. A sentinel character already in the raw text is first replaced by one the normalizer
deletes, so it can neither match nor join a token (``tokenizers`` deletes private-use characters too).

Measured (2 cores): reading the table off ``tokenizers`` takes 3.5 s once per process (1.1 M codepoints through the
normalizer, 0.9 M surviving characters through the pre-tokenizer).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path

KIND_SAME = 0
KIND_DELETE = 1
KIND_SPACE = 2
KIND_WORD = 3  # the character as a word of its own: " c "
KIND_MAPPED = 4
SENTINEL_BASE = 0xF0000  # plane 15, private use: deleted by BERT's normalizer
MAX_ADDED_TOKENS = 0xFFFD


@dataclasses.dataclass(frozen=True)
class CharacterTable:
    range_starts: tuple[int, ...]  # sorted; range i covers [range_starts[i], range_starts[i + 1])
    range_kinds: tuple[int, ...]
    mapped: dict[int, str]  # KIND_MAPPED codepoints to their string
    deleted: str  # a character the normalizer deletes (replaces raw sentinels)


def _pre_tokenized(pre_tokenizer, char: str) -> str:
    """``char`` as the pre-tokenizer leaves it between two letters: " " (a split), " c " (a word) or ``char``."""
    if pre_tokenizer is None:
        return char
    pieces = [piece for piece, _ in pre_tokenizer.pre_tokenize_str(f"a{char}a")]
    if pieces == ["a", "a"]:
        return " "
    if pieces == ["a", char, "a"]:
        return f" {char} "
    if pieces == [f"a{char}a"]:
        return char
    raise ValueError(f"pre-tokenizer splits 'a' U+{ord(char):04X} 'a' as {pieces}, not per character")


def _final(normalizer, pre_tokenizer, char: str, cache: dict[str, str]) -> str:
    normal = normalizer.normalize_str(char) if normalizer is not None else char
    out = []
    for c in normal:
        if c not in cache:
            cache[c] = _pre_tokenized(pre_tokenizer, c)
        out.append(cache[c])
    return "".join(out)


def _kind(char: str, final: str) -> int:
    if final == char:
        return KIND_SAME
    if final == "":
        return KIND_DELETE
    if final == " ":
        return KIND_SPACE
    if final == f" {char} ":
        return KIND_WORD
    return KIND_MAPPED


@functools.lru_cache(maxsize=4)
def character_table(tokenizer_json: Path, added: int) -> CharacterTable:
    """The table of the tokenizer saved at ``tokenizer_json``, with ``added`` sentinels (module docstring)."""
    import tokenizers

    tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_json))
    normalizer, pre_tokenizer = tokenizer.normalizer, tokenizer.pre_tokenizer
    starts, kinds, mapped, cache, deleted = [], [], {}, {}, None
    for code in range(sys.maxunicode + 1):
        if 0xD800 <= code <= 0xDFFF:  # surrogates: never in UTF-8 (decoded as U+FFFD)
            kind = KIND_DELETE
        elif SENTINEL_BASE <= code < SENTINEL_BASE + added:
            kind = KIND_WORD
        else:
            char = chr(code)
            final = _final(normalizer, pre_tokenizer, char, cache)
            kind = _kind(char, final)
            if kind == KIND_MAPPED:
                mapped[code] = final
            elif kind == KIND_DELETE and deleted is None:
                deleted = char
        if not kinds or kinds[-1] != kind or kind == KIND_MAPPED:
            starts.append(code)
            kinds.append(kind)
    if added and deleted is None:
        raise ValueError(f"{tokenizer_json}: the normalizer deletes no character, so added tokens cannot be marked")
    return CharacterTable(tuple(starts), tuple(kinds), mapped, deleted or "")
