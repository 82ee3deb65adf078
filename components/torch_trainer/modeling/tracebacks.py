"""Where in the user's code an exception was raised: the last traceback frame outside torch and torchtfx.

A model that fails in PyTorch is reported with torch's own error and that line, e.g. ``/path/model.py:41 in
forward: `return h[:, 0] - h[:, 1]```, rather than a traceback through torch's module machinery.
"""

from __future__ import annotations

import linecache
import os
import sysconfig
import traceback
from pathlib import Path

import torch

_TORCH_DIR = str(Path(torch.__file__).parent) + os.sep
_TORCHTFX_DIR = str(Path(__file__).resolve().parents[2]) + os.sep  # components/: torchtfx's own code
_STDLIB_DIR = sysconfig.get_paths()["stdlib"] + os.sep


def _is_user_file(filename: str) -> bool:
    if filename.startswith("<"):
        return False
    resolved = str(Path(filename).resolve()) if os.path.exists(filename) else filename
    return not any(resolved.startswith(d) or filename.startswith(d) for d in (_TORCH_DIR, _TORCHTFX_DIR, _STDLIB_DIR))


def user_frame(err: BaseException) -> str | None:
    """``file:line in function: `code``` of the innermost frame of ``err``'s traceback in the user's code."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if _is_user_file(f.filename)]
    if not frames:
        return None
    frame = frames[-1]
    code = (frame.line or linecache.getline(frame.filename, frame.lineno or 0)).strip()
    where = f"{frame.filename}:{frame.lineno} in {frame.name}"
    return f"{where}: `{code}`" if code else where


def torch_error(err: BaseException) -> str:
    """``Type: first line of the message``, and the user's line where there is one."""
    first = (str(err).strip().splitlines() or [""])[0][:400]
    frame = user_frame(err)
    return f"{type(err).__name__}: {first}" + (f" at {frame}" if frame else "")
