"""The notebook figure tables: values formatted, every string escaped; a run shows
itself, and so does a folder that is not one."""

from __future__ import annotations

from stateseer.core.reprs import figure, figures_html
from stateseer.core.rundir import RunDir


def test_figures_are_formatted_and_escaped():
    page = figures_html("run <script>x</script>", [("a & b", 0.12345), ("none", None),
                                                    ("<i>", "<img src=x>")])
    assert "<script>x" not in page and "&lt;script&gt;x&lt;/script&gt;" in page
    assert "<td>a &amp; b</td><td>0.123</td>" in page and "<td>none</td><td>—</td>" in page
    assert "&lt;img src=x&gt;" in page and figure(3) == "3"


def test_a_folder_that_is_no_run_says_so(tmp_path):
    page = RunDir(tmp_path)._repr_html_()
    assert "cannot be read" in page and "config.json" in page
