"""The course cites its sources by what they are, and every lesson points to them.

The write-ups the course grew from are kept outside the repository and
numbered there ("seed 000" ...). A learner has neither the folder nor the
numbers, so no file that a learner reads may use them: the notebooks, the step
files, the package (docstrings, messages, command-line help), the README, the
book's own pages and the tools that generate the book.
"""
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "docs" / "sources.md"

LEARNER_FACING = sorted(
    {
        ROOT / "README.md",
        ROOT / "book.toml",
        *ROOT.glob("notebooks/*.ipynb"),
        *ROOT.glob("steps/*.py"),
        *ROOT.glob("dezero_mini/**/*.py"),
        *ROOT.glob("docs/**/*.md"),
        *ROOT.glob("tools/*.py"),
    }
)
# "seed 000" in any case and spacing, and the folder that holds the write-ups.
INTERNAL_NAME = re.compile(r"seed\s+0|shared/seeds", re.IGNORECASE)

LESSONS = sorted(p for p in ROOT.glob("notebooks/[0-9][0-9]_*.ipynb") if not p.name.startswith("00_"))


def _text(path):
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        return "\n".join(cell.source for cell in nb.cells)
    return path.read_text(encoding="utf-8")


def test_the_scan_covers_the_learner_facing_files():
    names = {p.relative_to(ROOT).as_posix() for p in LEARNER_FACING}
    assert {"README.md", "steps/step01_leaking_graph.py", "dezero_mini/cli/program.py",
            "tools/build_book.py", "docs/sources.md"} <= names
    assert any(n.startswith("notebooks/01_") for n in names)


@pytest.mark.parametrize("path", LEARNER_FACING, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_internal_name_for_a_source(path):
    hits = [
        f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for text in [_text(path)]
        for m in INTERNAL_NAME.finditer(text)
    ]
    assert not hits, (
        f"{path.relative_to(ROOT)} names a source by its internal number ({'; '.join(hits)}); "
        "cite it by what it is, as docs/sources.md does"
    )


def test_the_pattern_finds_what_it_must():
    for text in ("Seed 000's first fix", "seed 003", "SEED  004", "../shared/seeds/000.txt"):
        assert INTERNAL_NAME.search(text), text
    for text in ("seeded numpy code", "seeds 0-19", "seed=0", "Workload(seed=1)"):
        assert not INTERNAL_NAME.search(text), text


def test_the_sources_chapter_cites_every_source():
    text = " ".join(SOURCES.read_text(encoding="utf-8").split())
    for must in [
        "nnengine-pro",                       # the five write-ups
        "2021-06-19",
        "OP Should Not Have Unused Input",
        "github.com/PaddlePaddle/Paddle/wiki/OP-Should-Not-Have-Unused-Input",
        "github.com/apache/mxnet/blob/master/docs/static_site/src/pages/api/architecture/note_memory.md",
        "2022-05-20",
        "2017-08-17",
        "Deep Learning from Scratch 3",       # the book and DeZero
        "github.com/oreilly-japan/deep-learning-from-scratch-3",
        "arxiv.org/abs/1512.01274",           # MXNet
        "arxiv.org/abs/1604.06174",           # sublinear memory
        "pytorch.org/docs/stable/notes/faq",  # accumulating losses
        "docs.python.org/3/library/gc",
        "docs.python.org/3/library/weakref",
        "docs.python.org/3/library/tracemalloc",
    ]:
        assert must in text, f"docs/sources.md does not cite {must!r}"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_each_lesson_ends_with_further_reading(path):
    nb = nbformat.read(path, as_version=4)
    last = [c.source for c in nb.cells if c.cell_type == "markdown"][-1]
    assert "## Further reading" in last, f"{path.name}: end with a '## Further reading' section"
    reading = last.split("## Further reading", 1)[1]
    items = [line for line in reading.splitlines() if line.startswith("* ")]
    assert 2 <= len(items) <= 4, f"{path.name}: two or three references under Further reading"
    assert "](../docs/sources.md)" in reading, f"{path.name}: link Further reading to the sources chapter"


def test_readme_has_a_sources_section():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.search(r"^## Sources", readme, re.MULTILINE)
    assert "](docs/sources.md)" in readme


# A source a reader can open has a link; one that cannot be found says so in
# these words, and then the course takes what it tells "as reported".
LINK = re.compile(r"<https?://[^>\s]+>|\]\(https?://[^)\s]+\)")
NO_LINK = re.compile(r"\*\*(Unpublished|Not findable)[:.]")
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def _source_entries():
    """The bulleted entries of docs/sources.md, each joined into one line, by section."""
    entries, section, current = [], None, None
    for line in SOURCES.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section, current = line[3:].strip(), None
        elif line.startswith("- "):
            current = [section, line[2:].strip()]
            entries.append(current)
        elif current is not None and line.startswith("  "):
            current[1] += " " + line.strip()
        else:
            current = None
    return entries


def test_the_entries_are_found():
    sections = {section for section, _ in _source_entries()}
    assert {"The five write-ups", "Papers and design notes", "CPython's documentation"} <= sections
    write_ups = [text for section, text in _source_entries() if section == "The five write-ups"]
    assert len(write_ups) == 5, write_ups


@pytest.mark.parametrize("section, text", _source_entries(), ids=lambda v: v[:40])
def test_every_source_has_a_link_or_says_that_none_exists(section, text):
    a_book = "a printed book" in text  # no page to open; the entry names where its code is
    assert LINK.search(text) or NO_LINK.search(text) or a_book, (
        f"docs/sources.md, {section!r}: {text[:80]!r}... gives no link a reader can open; give one, "
        "or say '**Unpublished:' or '**Not findable:' and take what it tells as reported"
    )
    if NO_LINK.search(text):
        assert "report" in text, f"{text[:80]!r}: say that the course takes it as its author reports it"


@pytest.mark.parametrize("section, text", _source_entries(), ids=lambda v: v[:40])
def test_every_title_reads_without_cjk_fonts(section, text):
    """A browser without CJK fonts draws boxes: the title a reader sees first is in Latin script,
    the original beside it."""
    title = re.match(r"\*\*(.+?)\*\*|[^*]*?\*(.+?)\*", text)
    shown = next(filter(None, title.groups())) if title else text.split("(")[0]
    assert not CJK.search(shown), f"docs/sources.md: the title {shown!r} needs a Latin-script title first"


def test_the_pattern_for_a_link_or_its_absence():
    assert LINK.search("see <https://arxiv.org/abs/1604.06174>.")
    assert LINK.search("[`gc`](https://docs.python.org/3/library/gc.html)")
    assert not LINK.search("mxnet.io/architecture/note_memory.html")
    assert NO_LINK.search("**Not findable: we found no public address for it.**")
    assert not NO_LINK.search("a post that is not findable")


#: Words with which a lesson says that a source it cites cannot be opened.
CANNOT_BE_OPENED = re.compile(r"unpublished|could not be found|no public copy|a printed book", re.I)


def _further_reading_items(path):
    nb = nbformat.read(path, as_version=4)
    reading = [c.source for c in nb.cells if c.cell_type == "markdown"][-1].split("## Further reading", 1)[1]
    items, current = [], None
    for line in reading.splitlines():
        if line.startswith("* "):
            current = [line[2:].strip()]
            items.append(current)
        elif current is not None and line.strip():
            current.append(line.strip())
    return [" ".join(item) for item in items]


@pytest.mark.parametrize("path", sorted(ROOT.glob("notebooks/[0-9][0-9]_*.ipynb")),
                         ids=lambda p: p.name)
def test_every_source_a_lesson_cites_can_be_opened_or_the_lesson_says_it_cannot(path):
    """Each item of a lesson's Further reading gives an address a reader can open, points to
    the sources chapter, or says that the source cannot be opened (unpublished, not found,
    a printed book)."""
    for item in _further_reading_items(path):
        assert LINK.search(item) or "](../docs/sources.md)" in item or CANNOT_BE_OPENED.search(item), (
            f"{path.name}, Further reading: {item[:90]!r}... gives no address; link the page, or "
            "say that it cannot be found online (or is a printed book)")
