"""Text from data made visible: no control or direction-changing character reaches a reader.

Row values, keys, column and table names come from the databases and are attacker-
controlled. Escaping for HTML, Markdown or XML keeps them from becoming markup, but
characters that are not markup still mislead a reviewer: a NUL or an ESC sequence in a
terminal, a BEL, and bidirectional overrides and isolates (U+202E makes ``rtl‮gnp.exe``
read as ``rtlexe.png``; Unicode TR#9, and CVE-2021-42574 "Trojan Source"). Every
human-facing output shows them as escaped code points, ``\\u202e``, instead.
"""

from __future__ import annotations

import re

# C0 and C1 controls (newlines and tabs included: one value is one line), DEL, the bidi
# embeddings, overrides, isolates and marks, zero-width characters, the BOM, and the line
# and paragraph separators.
_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def visible(text: str) -> str:
    """``text`` with every hidden or direction-changing character as ``\\uXXXX``."""
    return _HIDDEN.sub(lambda match: f"\\u{ord(match[0]):04x}", text)
