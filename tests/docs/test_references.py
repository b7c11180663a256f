"""What the repository says of itself holds: it cites nothing outside it, every `docs/semantics.md §N` it cites
is a section of the rule book and every link inside the docs reaches a heading, and its comments say why, never how
long (figures belong in benchmarks/README.md)."""

from __future__ import annotations

import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.unit

SEMANTICS = REPO / "docs" / "semantics.md"
# Files a clone does not have: the source documents this project was written from.
OUTSIDE = re.compile(r"\.\./shared|shared/reference|PULSAR_(OFFLOAD_)?SEMANTICS")
CITATION = re.compile(r"semantics\.md §(\d+(?:\.\d+)?)")
TEXT_SUFFIXES = {
    ".py",
    ".md",
    ".j2",
    ".toml",
    ".yaml",
    ".yml",
    ".sh",
    ".conf",
    ".txt",
    ".json",
    ".ini",
    ".mako",
}
# A measurement in a comment: a before -> after figure, a figure against another, CPU-seconds, a dated measurement.
UNIT = r"(?:CPU-s|s|ms|min|MiB|GiB|MB|GB|%)"
TIMING = re.compile(
    rf"\d[\d.,]*\s?{UNIT}\s*(?:->|→)\s*~?\d"
    rf"|\d[\d.,]*\s*(?:->|→)\s*~?\d[\d.,]*\s?{UNIT}(?!\w)"
    rf"|\d[\d.,]*\s?{UNIT}\s+(?:against|instead of)\s+~?\d"
    r"|\b\d[\d.,]*\s?(?:CPU-s|worker-seconds|worker-minutes)\b"
    r"|\b[Mm]easured (?:on )?20\d\d-\d\d-\d\d"
    r"|\(20\d\d-\d\d-\d\d\)|,\s20\d\d-\d\d-\d\d\)"
    r"|\btook ~?\d"
)


def tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    return [REPO / name for name in listed if name and (REPO / name).is_file()]


def text_files() -> list[Path]:
    return [
        path
        for path in tracked_files()
        if path.suffix in TEXT_SUFFIXES or path.name in ("Makefile", "run", ".env.example", ".gitignore")
    ]


def test_nothing_refers_to_files_outside_the_repository():
    files = text_files()
    assert len(files) > 200, "the tracked files were found"
    this = Path(__file__).resolve()
    offenders = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()[:120]}"
        for path in files
        if path.resolve() != this
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert offenders == []


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but hyphens and underscores dropped, spaces as
    hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(path: Path) -> list[str]:
    return [m.group(2) for m in re.finditer(r"^(#{1,6}) (.+)$", path.read_text(encoding="utf-8"), re.M)]


def test_every_citation_of_the_rule_book_names_one_of_its_sections():
    sections = {m.group(1) for h in headings(SEMANTICS) if (m := re.match(r"(\d+(?:\.\d+)?)\.? ", h))}
    assert {str(n) for n in range(1, 12)} <= sections, "the rule book's sections are numbered"
    cited = {
        f"{path.relative_to(REPO)}: §{number}"
        for path in text_files()
        for number in CITATION.findall(path.read_text(encoding="utf-8", errors="replace"))
        if number not in sections
    }
    assert cited == set(), "citations of sections the rule book does not have"


def test_every_link_to_a_heading_of_the_docs_reaches_one():
    broken = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", text):
            linked = (page.parent / target).resolve() if target else page
            if linked.suffix == ".md" and anchor not in {github_anchor(h) for h in headings(linked)}:
                broken.append(f"{page.relative_to(REPO)} -> {target}#{anchor}")
    assert broken == []


def comments(path: Path) -> list[tuple[int, str]]:
    """The comments and docstrings of a Python file, or the ``#`` lines of any other file, by line number."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return [
            (n, line) for n, line in enumerate(text.splitlines(), 1) if line.lstrip().startswith(("#", "@#"))
        ]
    found = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            found.append((token.start[0], token.string))
        elif token.type == tokenize.STRING and token.string.lstrip("rbuRBU").startswith(('"""', "'''")):
            found += [(token.start[0] + i, line) for i, line in enumerate(token.string.splitlines())]
    return found


def test_comments_say_why_never_how_long():
    sources = [
        path
        for path in text_files()
        if path.suffix in {".py", ".sh", ".conf", ".toml", ".yaml"} or path.name == "Makefile"
        if "benchmarks" not in path.relative_to(REPO).parts
    ]
    assert len(sources) > 150, "the sources were found"
    timings = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()[:120]}"
        for path in sources
        for number, line in comments(path)
        if TIMING.search(line)
    ]
    assert timings == [], "a figure belongs in benchmarks/README.md, with the command that reproduces it"


@pytest.mark.parametrize(
    "line",
    [
        "# ~32 s of a fresh setup's 60 s, 18.9 -> 12.4 s on two cores",
        "# 33 min 54 s against 26 min 52 s with three",
        "# a DAG run is ~20 CPU-s of the suite's run",
        "    (means of three runs each, alternating, 2026-11-27).",
        "# Measured 2026-11-27: 73 tests",
        "# the 100,000-topic trim report took 13 s",
    ],
)
def test_a_timing_in_a_comment_is_found(line):
    assert TIMING.search(line)
