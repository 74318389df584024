"""The browser of the site checks (tools/site_browser.py): finding Chromium and
chromedriver, wording what the browser logged, and a real page that goes wrong.

Nothing here waits for an event to arrive: what a page logged is read from
chromedriver's log, which holds every entry logged before the command that
reads it, and the browser's own /favicon.ico request is left out by its address
(it comes after the load event, at a time nobody controls).
"""
import struct
from pathlib import Path

import pytest

import check_site  # noqa: E402  (tools/ is on sys.path: conftest)
import site_browser  # noqa: E402
from site_browser import REFUSE, Browser, BrowserError, BrowserTimeout, PageError, Reply, log_problem  # noqa: E402

URL = "http://127.0.0.1:8000/a.html"


@pytest.mark.parametrize("entry, problem", [
    ({"level": "SEVERE", "source": "console-api", "message": f'{URL} 0:99 "boom" 3'},
     "console error: boom 3"),
    ({"level": "SEVERE", "source": "console-api", "message": f'{URL} 4:2 "two words" "and \\"quotes\\""'},
     'console error: two words and "quotes"'),
    ({"level": "INFO", "source": "console-api", "message": f'{URL} 0:125 "fine"'}, None),
    ({"level": "WARNING", "source": "console-api", "message": f'{URL} 0:1 "careful"'}, None),
    ({"level": "SEVERE", "source": "javascript", "message": f"{URL} 0:144 Uncaught Error: bad"},
     f"uncaught error: Error: bad (at {URL}:1)"),
    ({"level": "SEVERE", "source": "network", "message": "http://h/missing.png - Failed to load resource: "
                                                         "the server responded with a status of 404 (File not found)"},
     "HTTP 404: http://h/missing.png"),
    ({"level": "SEVERE", "source": "network", "message": "https://cdn.invalid/x.js - Failed to load resource: "
                                                         "net::ERR_NAME_NOT_RESOLVED"},
     "request failed: https://cdn.invalid/x.js (net::ERR_NAME_NOT_RESOLVED)"),
    ({"level": "SEVERE", "source": "network", "message": "http://h/favicon.ico - Failed to load resource: "
                                                         "the server responded with a status of 404 (File not found)"},
     None),
    ({"level": "SEVERE", "source": "other", "message": "something else"}, "console error: something else"),
], ids=["console", "console-quoted", "info", "warning", "uncaught", "http-404", "net-error", "own-favicon",
        "other-source"])
def test_the_browsers_log_in_the_checks_words(entry, problem):
    assert log_problem(entry) == problem


def _program(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("programs, env, expected", [
    ((), {}, "no Chromium on PATH"),
    (("chromium",), {}, "no chromedriver on PATH"),
    (("chromium", "chromedriver"), {site_browser.CHROMIUM_ENV: "{tmp}/nowhere"},
     f"{site_browser.CHROMIUM_ENV}={{tmp}}/nowhere is not an executable file"),
    (("chromium", "chromedriver"), {site_browser.CHROMEDRIVER_ENV: "{tmp}/nowhere"},
     f"{site_browser.CHROMEDRIVER_ENV}={{tmp}}/nowhere is not an executable file"),
    (("chromium", "chromedriver"), {}, None),
], ids=["no-browser", "no-driver", "named-browser-missing", "named-driver-missing", "both"])
def test_finding_the_browser_says_what_is_missing_and_how_to_install_it(
        tmp_path, monkeypatch, programs, env, expected):
    for name in programs:
        _program(tmp_path, name)
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in (site_browser.CHROMIUM_ENV, site_browser.CHROMEDRIVER_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(tmp=tmp_path))
    found, why = site_browser.find_chromium()
    if expected is None:
        assert (found, why) == (str(tmp_path / "chromium"), "")
    else:
        assert found is None and why.startswith(expected.format(tmp=tmp_path))
        assert "apt-get install chromium chromium-driver" in why


def test_a_browser_that_is_not_a_program_is_refused_in_one_line(tmp_path):
    if site_browser.find_chromedriver()[0] is None:
        pytest.skip(site_browser.find_chromedriver()[1])
    missing = str(tmp_path / "no-such-chromium")
    with pytest.raises(BrowserError, match="is not an executable file") as caught:
        with Browser(missing):
            pass
    assert missing in str(caught.value) and "\n" not in str(caught.value)


# ------------------------------------------------------------- a real browser

@pytest.fixture(scope="module")
def browser():
    found, why = site_browser.find_chromium()
    if found is None:
        pytest.skip(why)
    with Browser(found, timeout=120) as opened:  # (only ends a hang; a busy machine is slow)
        yield opened


@pytest.mark.slow  # starts a browser
def test_a_page_that_goes_wrong_is_heard_answered_and_shot(browser, tmp_path):
    seen = []

    def answer(url):
        seen.append(url)
        if url == "https://course.test/page.html":
            return Reply(200, "<body style='margin:0'><div style='height:1500px'></div>"
                              "<script src='https://cdn.test/ok.js'></script>"
                              "<script src='https://cdn.test/down.js'></script>"
                              "<script src='https://cdn.test/typo.js'></script>"
                              "<script src='https://cdn.test/broken.js'></script>"
                              "<img src='https://course.test/gone.png'>"
                              "<script>console.error('boom', 42); console.log('fine');"
                              "throw new TypeError('failure')</script></body>",
                         {"Content-Type": "text/html"})
        if url.endswith("/ok.js"):
            return Reply(200, "window.answered = 'yes'", {"Content-Type": "text/javascript"})
        if url.endswith("/gone.png"):
            return Reply(404, "")
        if url.endswith("/down.js"):
            return REFUSE
        if url.endswith("/typo.js"):
            return "abort"  # not an answer the browser module knows
        if url.endswith("/broken.js"):
            raise KeyError("the test's own mistake")
        return None

    page = browser.new_page(width=400, height=300, intercept=answer)
    page.goto("https://course.test/page.html")
    assert page.evaluate("window.answered") == "yes"
    assert page.evaluate("new Promise(done => done([1, 'two']))") == [1, "two"]
    with pytest.raises(PageError, match="threw in the page: .*deep"):
        page.evaluate("(() => { throw new RangeError('deep') })()")
    with pytest.raises(BrowserTimeout, match=r"waiting for the never-true condition on https://course.test/"):
        page.wait_for("false", timeout=0.2, what="the never-true condition")
    target = tmp_path / "page.png"
    page.screenshot(target)
    width, height = struct.unpack(">II", target.read_bytes()[16:24])  # the PNG's IHDR
    assert (width, height) == (400, page.evaluate("document.documentElement.scrollHeight"))
    assert height > 1500  # the whole page, not the 300 px window
    page.close()
    problems = page.problems
    text = "\n".join(problems)
    assert "console error: boom 42" in text and "fine" not in text
    assert "uncaught error: TypeError: failure" in text
    assert "HTTP 404: https://course.test/gone.png" in text
    for name in ("down", "typo", "broken"):
        assert f"request failed: https://cdn.test/{name}.js" in text
    assert "intercept('https://cdn.test/typo.js') returned 'abort', not a Reply, REFUSE or None" in text
    assert "intercept('https://cdn.test/broken.js') raised KeyError" in text
    assert seen[0] == "https://course.test/page.html"


@pytest.mark.slow  # starts a browser
def test_a_page_after_another_hears_only_its_own_problems(browser, tmp_path):
    (tmp_path / "bad.html").write_text("<script>console.error('of the first page')</script>")
    (tmp_path / "good.html").write_text("<p>fine</p>")
    with check_site.serve(tmp_path) as base:
        first = browser.new_page()
        first.goto(base + "bad.html")
        second = browser.new_page()  # closes the first: what it logged stays the first's
        second.goto(base + "good.html")
        assert second.problems == []
    assert first.problems == ["console error: of the first page"]
