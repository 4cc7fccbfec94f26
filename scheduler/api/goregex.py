"""Regular expressions as Go's ``regexp`` reads them, for HyperNode ``regexMatch`` selectors.

Volcano compiles a member's pattern with Go's ``regexp.Compile`` (RE2 syntax) and matches it
unanchored against node names (``hyper_node_info.go`` ``nodeMatchSelector``). Python's ``re`` is
another dialect: it rejects ``\\z`` and reads ``[[:digit:]]`` as a plain character class that
matches nothing a node name holds, it accepts look-arounds and back-references Go refuses, and
it backtracks, so ``^(a|aa)+$`` against a long name runs for ever. ``google-re2`` (the RE2
library Go's engine follows) gives the same syntax and linear-time matching.

- ``compile_pattern(pattern) -> Pattern``: compiled once per distinct pattern; a pattern Go
  would refuse gives a ``Pattern`` whose ``error`` says why and which matches nothing, as
  Volcano's scheduler logs the error and picks no node.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2

__all__ = ["Pattern", "compile_pattern"]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the caller reports the error, naming the object


@dataclass(frozen=True, slots=True)
class Pattern:
    source: str
    error: str = ""
    """Why RE2 refused the pattern; empty when it compiled."""
    _compiled: Any = None

    def search(self, text: str) -> bool:
        """Go's ``MatchString``: whether the pattern matches anywhere in ``text``."""
        return self._compiled is not None and self._compiled.search(text) is not None


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Pattern:
    try:
        return Pattern(pattern, _compiled=re2.compile(pattern, _OPTIONS))
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        return Pattern(pattern, error=str(reason))
