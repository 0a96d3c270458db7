"""One duration formatter for every place Whimbrel shows a span of time to a person.

Two styles, different on purpose: the command line's is ``compact`` (``4m05s``, fits a
table column), the console's ``spaced`` (``4 min 05 s``, reads as prose, and turns to
days past 48 hours). Pure: no imports of ours.
"""

from __future__ import annotations

from typing import Literal

Style = Literal["compact", "spaced"]

#: Per style: the unit words (ms, s, min, h, d), the separator between a number and
#: its unit, and from how many hours on a span is shown in days (None: never).
_STYLES: dict[str, tuple[tuple[str, str, str, str, str], str, int | None]] = {
    "compact": (("ms", "s", "m", "h", "d"), "", None),
    "spaced": (("ms", "s", "min", "h", "d"), " ", 48),
}


def duration(seconds: float | None, style: Style = "compact") -> str:
    """A span of time for a person; empty for None.

    ``compact``: ``850ms``, ``12.3s``, ``4m05s``, ``2h03m`` (hours however many).
    ``spaced``: ``850 ms``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``, ``3 d 04 h``.
    """
    if seconds is None:
        return ""
    (ms, s, mins, h, d), sep, day_from = _STYLES[style]
    if seconds < 1:
        return f"{seconds * 1000:.0f}{sep}{ms}"
    if seconds < 60:
        return f"{seconds:.1f}{sep}{s}"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}{sep}{mins}{sep}{secs:02d}{sep}{s}"
    hours, minutes = divmod(minutes, 60)
    if day_from is None or hours < day_from:
        return f"{hours}{sep}{h}{sep}{minutes:02d}{sep}{mins}"
    days, hours = divmod(hours, 24)
    return f"{days}{sep}{d}{sep}{hours:02d}{sep}{h}"
