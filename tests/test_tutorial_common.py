"""The tutorials' shared printing helpers: times in readable units, and quick mode's note
that its times are no measure of speed."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tutorials"))
from _common import format_seconds, timing_note  # noqa: E402


@pytest.mark.parametrize("seconds,text", [
    (8.5e-7, "850 ns"), (4.958e-6, "4.96 us"), (1.2345e-5, "12.3 us"), (9.9999e-6, "10.0 us"),
    (0.00094, "940 us"), (0.00099996, "1.00 ms"), (0.05189, "51.9 ms"), (0.6, "600 ms"),
    (1.2, "1.20 s"), (123.4, "123 s"), (1234.0, "1234 s"),
])
def test_format_seconds_picks_the_unit(seconds, text):
    assert format_seconds(seconds) == text


def test_timing_note_only_in_quick_mode(capsys):
    timing_note(False)
    assert capsys.readouterr().out == ""
    timing_note(True)
    assert "no measure of speed" in capsys.readouterr().out
