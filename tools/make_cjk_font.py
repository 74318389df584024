"""Make the book's font for Chinese, Japanese and Korean characters.

    python tools/make_cjk_font.py [SOURCE_FONT]

The course cites write-ups by their original titles, in Chinese, Korean and
Japanese. A browser on a machine without CJK fonts (a plain Linux install, a
CI runner) draws those characters as empty boxes. So the book ships its own
font, ``docs/fonts/course-cjk.woff``: only the glyphs that the course's pages
use, taken from WenQuanYi Micro Hei (Apache License 2.0; its notice is
``docs/fonts/LICENSE-wqy-microhei.txt``), under the family name "Course CJK".
``docs/course.css`` gives it to the browser for those characters only.

Run this again whenever a page gains a CJK character that the font lacks
(``tests/test_cjk_font.py`` says which). SOURCE_FONT defaults to where
Debian's ``fonts-wqy-microhei`` package installs it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FONT = ROOT / "docs" / "fonts" / "course-cjk.woff"
FAMILY = "Course CJK"
DEFAULT_SOURCE = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")
# CJK punctuation, kana, Hangul jamo and syllables, the unified ideographs
# (and extension A), compatibility ideographs and full-width forms.
CJK = re.compile(r"[\u1100-\u11ff\u3000-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
                 r"\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def book_text(root: Path = ROOT) -> str:
    """The text of every page that the book is made from: the notebooks'
    cells, the Markdown pages of docs/ and the README."""
    parts = []
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        parts += ["".join(cell.get("source", "")) for cell in cells]
    parts += [p.read_text(encoding="utf-8") for p in sorted((root / "docs").glob("*.md"))]
    readme = root / "README.md"
    if readme.is_file():
        parts.append(readme.read_text(encoding="utf-8"))
    return "\n".join(parts)


def cjk_characters(text: str) -> set[str]:
    """The CJK characters of ``text``: those that need the font."""
    return set(CJK.findall(text))


def font_characters(path: Path = FONT) -> set[str]:
    """The characters that the font at ``path`` has glyphs for."""
    from fontTools.ttLib import TTFont

    return {chr(code) for code in TTFont(path).getBestCmap()}


def make_font(source: Path, dest: Path, characters: set[str]) -> None:
    """Write to ``dest`` (WOFF) the glyphs of ``characters`` from the font at
    ``source`` (a .ttf, or the first font of a .ttc), renamed to FAMILY."""
    from fontTools import subset
    from fontTools.ttLib import TTCollection, TTFont

    font = TTCollection(source).fonts[0] if source.suffix.lower() == ".ttc" else TTFont(source)
    missing = sorted(c for c in characters if ord(c) not in font.getBestCmap())
    if missing:
        raise SystemExit(f"make_cjk_font: {source} has no glyph for {''.join(missing)!r}; "
                         "give a font that has them")
    options = subset.Options()
    options.flavor = "woff"  # zlib: needs no brotli module, which WOFF2 would
    options.layout_features = []  # no vertical forms or ligatures: the book sets these in running text
    options.name_IDs = [0, 1, 2, 3, 4, 5, 6]  # keep the copyright and version records
    subsetter = subset.Subsetter(options)
    subsetter.populate(text="".join(sorted(characters)))
    subsetter.subset(font)
    names = font["name"]
    for record in list(names.names):
        if record.nameID in (1, 4, 16, 21):
            names.setName(FAMILY, record.nameID, record.platformID, record.platEncID, record.langID)
        elif record.nameID == 6:
            names.setName(FAMILY.replace(" ", ""), 6, record.platformID, record.platEncID, record.langID)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=dest.parent, suffix=".tmp", delete=False) as tmp:
        temporary = Path(tmp.name)
    try:
        subset.save_font(font, str(temporary), options)
        temporary.chmod(0o644)  # a temporary file is made private; the font is for everyone
        os.replace(temporary, dest)  # never a half-written font in docs/
    finally:
        temporary.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", type=Path, default=DEFAULT_SOURCE,
                        help="WenQuanYi Micro Hei, .ttc or .ttf (default: %(default)s)")
    args = parser.parse_args(argv)
    if not args.source.is_file():
        print(f"make_cjk_font: no font at {args.source}; install Debian's fonts-wqy-microhei "
              "(apt-get install fonts-wqy-microhei) or give the font's path", file=sys.stderr)
        return 2
    characters = cjk_characters(book_text())
    make_font(args.source, FONT, characters)
    print(f"{FONT.relative_to(ROOT)}: {len(characters)} characters, {FONT.stat().st_size / 1024:.1f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
