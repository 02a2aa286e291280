"""The README and the guides link to files and headings that exist (the guides were
split out of the README; a moved section must not leave a dead link behind)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    title = re.sub(r"[`*_]", "", title.strip().lower())
    return re.sub(r"[^\w\- ]", "", title).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def _links(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return [m.group(1) for m in LINK.finditer(text)
            if not re.match(r"^[a-z]+:", m.group(1))]  # http:, https:, mailto: ...


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    bad = []
    for link in _links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if target.parent == ROOT / "docs" / "tutorials" and target.suffix == ".ipynb":
            target = ROOT / "notebooks" / target.name  # rendered there by make docs
        if not target.exists():
            bad.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            bad.append(f"{link}: no such heading in {target.name}")
    assert not bad, bad


def test_the_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250  # the details live in docs/guide
    for cmd in ("make demo", "make test"):
        assert cmd in text


def test_the_site_builds_strictly(tmp_path):
    """``make docs``: every page, the API reference read from the sources, no warning."""
    import os
    import subprocess
    import sys

    pytest.importorskip("mkdocs", reason="the test extra installs mkdocs-material")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    reference = (tmp_path / "site" / "reference" / "index.html").read_text(encoding="utf-8")
    assert "diagnose_run" in reference and "WeightedAutomaton" in reference
    assert "Parameters" in reference  # numpydoc sections rendered
    for page in ("guide/diagnosis", "guide/study", "tutorials"):
        assert (tmp_path / "site" / page / "index.html").exists(), page
    cli = (tmp_path / "site" / "cli" / "index.html").read_text(encoding="utf-8")
    from stateseer.app.cli.main import build_parser

    for name in build_parser()._subparsers._group_actions[0].choices:  # every command
        assert f"stateseer {name}</code>" in cli, name


def _bash_lines(page: Path) -> list[str]:
    """The commands of the page's ``bash`` blocks: prompts, comments and line
    continuations resolved, ``&&`` chains split."""
    out = []
    text = page.read_text(encoding="utf-8")
    for block in re.findall(r"^```(?:bash|console|sh)\n(.*?)^```", text, flags=re.S | re.M):
        block = re.sub(r"\\\n\s*", " ", block)
        for line in block.splitlines():
            line = re.sub(r"^\$ ", "", line.strip())
            line = re.sub(r"\s+#.*$", "", line) if not line.startswith("#") else ""
            out += [part.strip() for part in line.split("&&") if part.strip()]
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_in_the_docs_is_one_the_tools_accept(page):
    """Every ``stateseer`` command of a bash block parses with today's command line (no
    flag or choice the parser does not know), every script it runs exists, every ``make``
    target is in the Makefile; every python block compiles and every json block parses.
    (The blocks marked ``readme-test`` also run: tests/test_notebooks.py.)"""
    import json
    import shlex

    from stateseer.app.cli.main import build_parser

    parser = build_parser()
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    # files the page has the reader write (a block marked `readme-test: file NAME`)
    written = set(re.findall(r"<!-- readme-test: file (\S+) -->",
                             page.read_text(encoding="utf-8")))
    bad = []
    for line in _bash_lines(page):
        synopsis = re.sub(r"\s*\[[^\]]*\]", "", line)  # optional parts of a synopsis
        words = shlex.split(synopsis.replace("<", "").replace(">", ""))
        while words and re.match(r"^[A-Z_]+=", words[0]):  # VAR=value prefixes
            words = words[1:]
        if words and words[0] in ("nice", "time", "timeout"):
            words = words[1:] if words[0] != "timeout" else words[2:]
        if not words:
            continue
        tool = Path(words[0]).name
        if tool == "stateseer":
            try:
                parser.parse_args(words[1:])
            except SystemExit:
                bad.append(f"{line}: `stateseer` refuses it")
        elif tool.startswith("python") and len(words) > 1 and words[1].endswith(".py"):
            if not (ROOT / words[1]).exists() and words[1] not in written:
                bad.append(f"{line}: no script {words[1]}")
        elif tool == "make" and len(words) > 1 and "=" not in words[1]:
            if words[1] not in targets:
                bad.append(f"{line}: no make target {words[1]}")
    text = page.read_text(encoding="utf-8")
    for code in re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
        try:
            compile(code, str(page), "exec")
        except SyntaxError as exc:
            bad.append(f"python block: {exc}")
    for code in re.findall(r"^```json\n(.*?)^```", text, flags=re.S | re.M):
        try:
            json.loads(code)
        except ValueError as exc:
            bad.append(f"json block: {exc}")
    assert not bad, bad
