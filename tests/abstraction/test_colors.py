"""Class colours: stateseer's scale, or a run's own (``--colors``, #53)."""

from __future__ import annotations

import pytest

from stateseer.abstraction.colors import (
    ClassColors,
    class_color,
    mix_color,
    parse_colors,
    run_palette,
)
from stateseer.abstraction.errors import AbstractionError


def test_the_default_scale_is_unchanged():
    assert ClassColors(2).mix([1.0, 0.0]) == mix_color([1.0, 0.0]) == "#d62728"
    assert ClassColors(2).mix([0.0, 1.0]) == "#1f77b4"
    assert [ClassColors(4).solid(k) for k in range(4)] == [class_color(k, 4) for k in range(4)]


def test_a_runs_own_colours_drive_both_scales():
    two = ClassColors.of(["rotten", "fresh"], {"fresh": "#2ca02c"})
    assert two.solid(1) == "#2ca02c" and two.solid(0) == class_color(0, 2)
    assert two.mix([0.0, 1.0]) == "#2ca02c" and two.mix([0.5, 0.5]) == "#f7f7f7"
    three = ClassColors.of(["a", "b", "c"], {"c": "#000000"})
    assert three.mix([0.0, 0.0, 1.0]) == "#000000"  # sure: the class's own colour
    assert three.mix([0.3, 0.3, 0.4]) != "#000000"  # unsure: paler


@pytest.mark.parametrize(("text", "needle"), [
    ("left=#123456", "no class 'left'"),
    ("#123456", "gives 1 colours for 2 classes"),
    ("fresh=red", "not #rrggbb")])
def test_bad_colours_are_one_line(text, needle):
    with pytest.raises(AbstractionError, match=needle) as e:
        parse_colors(text, ["rotten", "fresh"])
    assert "\n" not in str(e.value)


def test_config_colours_are_read_and_checked():
    assert run_palette({}, ["a", "b"]) == ClassColors(2, (None, None))
    assert run_palette({"colors": {"b": "#010203"}}, ["a", "b"]).solid(1) == "#010203"
    with pytest.raises(AbstractionError, match="map class names"):
        run_palette({"colors": ["#010203"]}, ["a", "b"])
