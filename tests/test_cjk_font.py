"""The book's CJK font: the original titles of the sources must not turn into
empty boxes on a machine without CJK fonts, so the book ships the glyphs its
pages use (tools/make_cjk_font.py) and its style sheet hands them to the
browser."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
import make_cjk_font  # noqa: E402  (tools/make_cjk_font.py)

CSS = ROOT / "docs" / "course.css"


def test_the_font_has_a_glyph_for_every_cjk_character_of_the_book():
    needed = make_cjk_font.cjk_characters(make_cjk_font.book_text(ROOT))
    assert needed, "the book cites sources by their original titles: it has CJK characters"
    missing = needed - make_cjk_font.font_characters(make_cjk_font.FONT)
    assert not missing, (
        f"{make_cjk_font.FONT.relative_to(ROOT)} has no glyph for {''.join(sorted(missing))!r}, which "
        "a page uses: run `python tools/make_cjk_font.py` (Debian: apt-get install fonts-wqy-microhei)"
    )


def test_the_font_is_named_for_the_course_and_keeps_its_notice():
    from fontTools.ttLib import TTFont

    names = TTFont(make_cjk_font.FONT)["name"]
    assert names.getDebugName(1) == make_cjk_font.FAMILY
    notice = (ROOT / "docs" / "fonts" / "LICENSE-wqy-microhei.txt").read_text(encoding="utf-8")
    assert "Apache License" in notice and "WenQuanYi" in notice


def test_the_style_sheet_loads_the_font_for_cjk_characters():
    css = CSS.read_text(encoding="utf-8")
    face = re.search(r"@font-face\s*{(?P<body>[^}]*)}", css)
    assert face, "docs/course.css: no @font-face"
    body = face.group("body")
    assert f'font-family: "{make_cjk_font.FAMILY}"' in body
    url = re.search(r'url\("([^"]+)"\)', body).group(1)
    # mdBook writes the style sheet to docs/ in the book, and build_book.py copies docs/fonts/ there
    assert (CSS.parent / url).resolve() == make_cjk_font.FONT.resolve()
    assert "U+4E00-9FFF" in body and "U+AC00-D7AF" in body  # Chinese and Korean
    stack = re.search(r"html\s*{[^}]*font-family:\s*([^;]+);", css).group(1)
    assert f'"{make_cjk_font.FAMILY}"' in stack


def test_the_book_build_copies_the_fonts_next_to_the_style_sheet():
    import build_book

    assert build_book.FONTS == "docs/fonts"
    assert 'additional-css = ["docs/course.css"]' in (ROOT / "book.toml").read_text(encoding="utf-8")


# (text, the characters that need the font)
CASES = [
    ("plain English, café, ❸ and — dashes", ""),
    ("深度学习 framework", "深度学习"),
    ("메모리 관리", "메모리관리"),
    ("ゼロから作る", "ゼロから作る"),
    ("OP规范:OP", "规范"),
]


@pytest.mark.parametrize("text, needed", CASES)
def test_which_characters_need_the_font(text, needed):
    assert make_cjk_font.cjk_characters(text) == set(needed)


def test_a_missing_source_font_is_one_clear_line(tmp_path, capsys):
    assert make_cjk_font.main([str(tmp_path / "nofont.ttc")]) == 2
    err = capsys.readouterr().err
    assert "no font at" in err and "fonts-wqy-microhei" in err
