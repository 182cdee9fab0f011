"""Progress of a sweep: a bar with ETA on a terminal, one line per unit elsewhere."""

from __future__ import annotations

import io
import re

from ppsweep.sweep.progress import Progress, format_duration


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_lines_with_eta_when_not_a_terminal():
    out = io.StringIO()
    progress = Progress(4, 100, stream=out)
    for k in range(4):
        progress.advance(f"p=4 m={8 * (k + 1)}")
    progress.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("[1/4] p=4 m=8  100 points, ") and ", ETA " in lines[0]
    assert lines[-1].startswith("[4/4] p=4 m=32  400 points, ") and lines[-1].endswith("ETA 0 s")


def test_a_bar_with_eta_on_a_terminal():
    out = _Terminal()
    progress = Progress(3, 10, stream=out)
    progress.advance("p=8 m=16")
    progress.advance("p=8 m=32")
    progress.close()
    text = out.getvalue()
    assert "\r" in text  # redrawn in place, not one line per unit
    assert re.search(r"2/3 units \[\d\d:\d\d<\d\d:\d\d ETA, p=8 m=32, [0-9,]+ points/s\]", text)
    assert "[1/3]" not in text


def test_the_bar_can_be_forced_either_way():
    out = _Terminal()
    Progress(1, 1, stream=out, bar=False).advance("x")
    assert out.getvalue().startswith("[1/1] x  1 points")


def test_format_duration():
    assert format_duration(4.4) == "4 s"
    assert format_duration(200) == "3 min 20 s"
    assert format_duration(7500) == "2 h 05 min"
