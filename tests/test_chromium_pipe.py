"""The DevTools pipe client of the site checks (tools/chromium_pipe.py), on pages made
to go wrong and on "browsers" that do.

| case                                        | what the client does                                |
|---------------------------------------------|-----------------------------------------------------|
| no Chromium on PATH, none named             | find_chromium: None and how to install one          |
| DEZERO_MINI_CHROMIUM names no program       | find_chromium: None, the value and how to install   |
| the program named does not exist            | BrowserError: not an executable file, how to install|
| the program exits at once (a crash)         | BrowserError: its exit code and its last stderr     |
| the program never answers (a hang)          | BrowserTimeout naming what it waited for, in time   |
| the program stops reading its pipe          | BrowserTimeout naming the command, not a blocked us |
| Chromium killed in the middle of a wait     | BrowserError: exited, and what was awaited          |
| the page crashes                            | BrowserError: the page crashed, what was awaited    |
| a page that throws, logs an error, 404s     | page.problems, in words                             |
| JavaScript that throws in evaluate          | PageError with the page's message                   |
| a page that sends the tab on at once        | goto waits for the load of the page it went to      |
| a condition that never holds                | BrowserTimeout naming the condition and the page    |
| requests answered, refused or let through   | intercept: Reply / REFUSE / None                    |
| intercept raises, or returns something else | the request refused, the page's problems say why    |
| isolated pages, pages of the default context| nothing shared / storage shared                     |
| a page's worker fetches and throws          | intercepted, and its error is the page's problem    |
| the block ends (normally or on an error)    | no process of Chromium's group left                 |
| SIGTERM or Ctrl-C (SIGINT) to the Python    | the block's end runs: no process left               |
| the Python is killed (SIGKILL)              | Chromium ends itself when its pipe closes           |
"""
import functools
import http.server
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
import check_site  # noqa: E402
import chromium_pipe  # noqa: E402
from chromium_pipe import (  # noqa: E402
    REFUSE,
    BrowserError,
    BrowserTimeout,
    Chromium,
    PageError,
    Reply,
    find_chromium,
)

pytestmark = pytest.mark.slow  # starts browsers


@pytest.fixture(scope="module")
def chromium_path():
    found, why = find_chromium()
    if found is None:
        pytest.skip(why)
    return found


@pytest.fixture(scope="module")
def browser(chromium_path):
    with Chromium(chromium_path, timeout=20) as opened:
        yield opened


def group_alive(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that still run (zombies are dead: they are left out)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _ppid, group = stat.rsplit(")", 1)[1].split()[:3]
        if int(group) == pgid and state != "Z":
            alive.append(int(entry.name))
    return alive


def wait_until_gone(pgid: int, seconds: float = 10) -> list[int]:
    deadline = time.monotonic() + seconds
    while (alive := group_alive(pgid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def fake_browser(tmp_path, body: str) -> str:
    path = tmp_path / "fake-chromium"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def start_failure(program: str, timeout: float, error=BrowserError) -> tuple[str, float]:
    """Start ``program`` as the browser, expecting ``error``: (its message, the seconds it took)."""
    start = time.monotonic()
    with pytest.raises(error) as caught:
        with Chromium(program, timeout=timeout):
            pass
    return str(caught.value), time.monotonic() - start


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads processes from /proc")


# ------------------------------------------------------------- finding and starting


def test_no_chromium_on_path_says_how_to_install_one(monkeypatch, tmp_path):
    monkeypatch.delenv(chromium_pipe.CHROMIUM_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    found, why = find_chromium()
    assert found is None
    assert "no Chromium on PATH" in why and "apt-get install chromium" in why
    assert chromium_pipe.CHROMIUM_ENV in why
    with pytest.raises(BrowserError, match="apt-get install chromium"):
        Chromium()


def test_a_named_chromium_that_is_not_a_program_is_refused(monkeypatch, tmp_path):
    not_a_program = tmp_path / "chromium.txt"
    not_a_program.write_text("text")
    for value in (str(tmp_path / "nowhere"), str(not_a_program), str(tmp_path)):
        monkeypatch.setenv(chromium_pipe.CHROMIUM_ENV, value)
        found, why = find_chromium()
        assert found is None
        assert value in why and "apt-get install chromium" in why


def test_a_missing_program_is_named_with_how_to_install(tmp_path):
    missing = str(tmp_path / "no-such-chromium")
    message, _ = start_failure(missing, timeout=5)
    assert missing in message and "not an executable file" in message and "apt-get install" in message


@needs_proc
def test_a_browser_that_exits_at_once_gives_its_code_and_last_words(tmp_path):
    crashing = fake_browser(tmp_path, 'echo "cannot open display" >&2\nexit 3')
    message, seconds = start_failure(crashing, timeout=20)
    assert seconds < 10  # the exit is noticed at once, not at the timeout
    assert "exited with code 3" in message and "cannot open display" in message
    assert "Chromium to start" in message and crashing in message


@needs_proc
def test_a_browser_that_never_answers_times_out_naming_the_wait(tmp_path):
    hanging = fake_browser(tmp_path, "echo $$ > \"$(dirname \"$0\")/pid\"\nexec sleep 60")
    message, seconds = start_failure(hanging, timeout=1.5, error=BrowserTimeout)
    assert 1.5 <= seconds < 10
    assert "timed out after 1.5 s waiting for Chromium to start and answer on its pipe" in message
    pid = int((tmp_path / "pid").read_text())
    assert wait_until_gone(pid) == []  # the hanging program was killed with its group


# A browser that answers its first command on the pipe, then reads nothing more.
DEAF_BROWSER = """#!{python}
import json, os, time
message = b""
while not message.endswith(b"\\0"):
    message += os.read(3, 1)
reply = {{"id": json.loads(message[:-1])["id"], "result": {{"product": "deaf"}}}}
os.write(4, json.dumps(reply).encode() + b"\\0")
time.sleep(60)
"""


@needs_proc
def test_a_browser_that_stops_reading_times_out_instead_of_blocking(tmp_path):
    deaf = tmp_path / "deaf-chromium"
    deaf.write_text(DEAF_BROWSER.format(python=sys.executable))
    deaf.chmod(0o755)
    with Chromium(str(deaf), timeout=1) as opened:
        start = time.monotonic()
        with pytest.raises(BrowserTimeout, match="waiting for Chromium to read Runtime.evaluate"):
            opened.send("Runtime.evaluate", {"expression": "'x'" * 100_000})  # more than a pipe holds
        assert time.monotonic() - start < 5
        group = opened.pid
    assert wait_until_gone(group) == []


@needs_proc
def test_chromium_killed_during_a_wait_is_reported(chromium_path):
    with Chromium(chromium_path, timeout=20) as opened:
        page = opened.new_page()
        os.killpg(opened.pid, signal.SIGKILL)
        with pytest.raises(BrowserError, match=r"Chromium (exited with code -9|closed its pipe) while we waited"):
            page.wait_for("false", what="a condition")


def test_a_crashed_page_is_reported_with_what_was_awaited(browser):
    page = browser.new_page()
    page.goto("data:text/html,<p>about to crash</p>")
    browser._post("Page.crash", session=page._session)  # Page.crash gets no reply: the page is gone
    with pytest.raises(BrowserError, match="the page crashed while we waited for the never-true condition"):
        page.wait_for("false", timeout=10, what="the never-true condition")


# ------------------------------------------------------------- pages


def test_page_problems_name_console_errors_exceptions_and_failed_loads(browser, tmp_path):
    page = browser.new_page()
    page.goto("data:text/html,<script>console.error('boom', 42); console.log('fine');"
              "setTimeout(() => { throw new TypeError('late failure') }, 0)</script>"
              "<img src='http://127.0.0.1:9/unsafe-port.png'>")
    page.wait_for("new Promise(done => setTimeout(() => done(true), 100))")  # the timer has fired
    text = "\n".join(page.problems)
    assert "console error: boom 42" in text and "fine" not in text
    assert "uncaught error: TypeError: late failure" in text
    assert "request failed: http://127.0.0.1:9/unsafe-port.png" in text
    page.close()


def test_the_browsers_own_favicon_request_is_not_the_pages_problem(browser, tmp_path):
    (tmp_path / "plain.html").write_text("<p>no icon named</p>")
    (tmp_path / "linked.html").write_text("<link rel='icon' href='missing-icon.png'><p>an icon named</p>")
    with check_site.serve(tmp_path) as base:
        plain = browser.new_page()
        plain.goto(base + "plain.html")
        linked = browser.new_page()
        linked.goto(base + "linked.html")
        # the icon requests come after the load event
        linked.wait_for("new Promise(done => setTimeout(() => done(true), 300))")
    assert plain.problems == []
    assert any("HTTP 404" in p and "missing-icon.png" in p for p in linked.problems), linked.problems
    plain.close()
    linked.close()


def test_isolated_pages_share_nothing_and_the_others_share_the_default_context(browser, tmp_path):
    (tmp_path / "page.html").write_text("<p>storage</p>")
    with check_site.serve(tmp_path) as base:
        pages = {name: browser.new_page(isolated=name.startswith("isolated")) for name in
                 ("shared 1", "shared 2", "isolated 1", "isolated 2")}
        for page in pages.values():
            page.goto(base + "page.html")
        pages["shared 1"].evaluate("localStorage.setItem('seen', 'yes')")
        pages["isolated 1"].evaluate("localStorage.setItem('seen', 'yes')")
        seen = {name: page.evaluate("localStorage.getItem('seen')") for name, page in pages.items()}
    assert seen == {"shared 1": "yes", "shared 2": "yes", "isolated 1": "yes", "isolated 2": None}
    for page in pages.values():
        page.close()


class _SlowImageHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the folder; /slow.png answers (404) only after a second."""

    def do_GET(self):
        if self.path == "/slow.png":
            time.sleep(1)
        super().do_GET()

    def log_message(self, *args):
        pass


def test_goto_waits_for_the_document_a_page_sends_the_tab_on_to(browser, tmp_path):
    # start.html moves on at once, and its own load event never comes (its image is slow):
    # goto waits for the load of the page it moved to, as a reader's tab shows it.
    (tmp_path / "start.html").write_text("<script>location.replace('next.html')</script><img src='slow.png'>")
    (tmp_path / "next.html").write_text("<p id='next'>arrived</p>")
    handler = functools.partial(_SlowImageHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        page = browser.new_page()
        page.goto(base + "start.html", timeout=10)
        assert page.url == base + "next.html"
        assert page.evaluate("document.readyState") == "complete"
        page.close()
    finally:
        server.shutdown()
        server.server_close()


def test_evaluate_returns_values_and_raises_what_the_page_threw(browser):
    page = browser.new_page()
    page.goto("data:text/html,<p id='p'>text</p>")
    assert page.evaluate("({n: 1 + 1, s: document.getElementById('p').textContent})") == {"n": 2, "s": "text"}
    assert page.evaluate("Promise.resolve([1, 'two'])") == [1, "two"]
    with pytest.raises(PageError, match="ReferenceError: notDefined is not defined"):
        page.evaluate("notDefined + 1")
    with pytest.raises(PageError, match="Error: asked to fail"):
        page.evaluate("Promise.reject(new Error('asked to fail'))")
    page.close()


def test_a_page_too_busy_to_answer_times_out_with_the_waits_own_figure(browser):
    """The page does not answer an evaluation within the time left (here: a
    promise that never settles): the wait still says its own timeout and the
    page (under load, it once said "after 0.280773 s", what was left)."""
    page = browser.new_page()
    page.goto("data:text/html,<p>busy</p>")
    with pytest.raises(BrowserTimeout) as caught:
        page.wait_for("new Promise(() => {})", timeout=0.5, what="a promise that never settles")
    assert str(caught.value) == ("timed out after 0.5 s waiting for a promise that never settles "
                                 "on data:text/html,<p>busy</p>")
    page.close()


def test_a_page_stuck_in_a_script_times_out_naming_the_address_it_was_given(browser):
    """A page whose script never ends answers nothing, not even its address:
    the wait still ends at its timeout and names the page by what was opened."""
    page = browser.new_page()
    page.goto("data:text/html,<p>stuck</p>")
    page.evaluate("setTimeout(() => { while (true) {} }, 0), 0")
    start = time.monotonic()
    with pytest.raises(BrowserTimeout) as caught:
        page.wait_for("true", timeout=0.5, what="a stuck page")
    assert str(caught.value) == "timed out after 0.5 s waiting for a stuck page on data:text/html,<p>stuck</p>"
    assert time.monotonic() - start < 0.5 + 1 + 1  # the wait, the look at the address, a margin
    page.close()


def test_a_condition_that_never_holds_times_out_naming_it_and_the_page(browser):
    page = browser.new_page()
    page.goto("data:text/html,<p>never ready</p>")
    start = time.monotonic()
    with pytest.raises(BrowserTimeout) as caught:
        page.wait_for("document.querySelector('#ready')", timeout=0.5, what="the #ready element")
    assert 0.5 <= time.monotonic() - start < 5
    assert "timed out after 0.5 s waiting for the #ready element on data:text/html" in str(caught.value)
    # a condition that comes true later is waited for, and its value returned
    page.evaluate("setTimeout(() => document.title = 'ready', 200), 0")
    assert page.wait_for("document.title === 'ready' && document.title", timeout=5) == "ready"
    page.close()


def test_intercepted_requests_are_answered_refused_or_let_through(browser):
    seen = []

    def answer(url):
        seen.append(url)
        if url == "https://course.test/page.html":
            return Reply(200, "<script src='https://cdn.test/ok.js'></script>"
                              "<script src='https://cdn.test/down.js'></script>"
                              "<script src='https://cdn.test/typo.js'></script>"
                              "<script src='https://cdn.test/broken.js'></script>"
                              "<img src='https://course.test/gone.png'>",
                         {"Content-Type": "text/html"})
        if url.endswith("/ok.js"):
            return Reply(200, "window.answered = 'yes'", {"Content-Type": "text/javascript"})
        if url.endswith("/gone.png"):
            return Reply(404, "")
        if url.endswith("/down.js"):
            return REFUSE
        if url.endswith("/typo.js"):
            return "abort"  # not an answer the client knows
        if url.endswith("/broken.js"):
            raise KeyError("the test's own mistake")
        return None  # data: URLs and the rest go through

    page = browser.new_page(intercept=answer)
    page.goto("https://course.test/page.html")
    assert page.evaluate("window.answered") == "yes"
    assert {f"https://cdn.test/{name}.js" for name in ("down", "typo", "broken")} <= set(page.failed_requests)
    problems = "\n".join(page.problems)
    assert "intercept('https://cdn.test/typo.js') returned 'abort', not a Reply, REFUSE or None" in problems
    assert "intercept('https://cdn.test/broken.js') raised KeyError" in problems
    assert any(p.startswith("HTTP 404: https://course.test/gone.png") for p in page.problems), page.problems
    assert seen[:1] == ["https://course.test/page.html"] and "https://cdn.test/ok.js" in seen
    page.close()
    assert browser._replies == {}  # the replies to the answers, which nobody awaits, are not kept


def test_a_workers_requests_and_errors_are_the_pages(browser):
    worker_code = ("fetch('https://cdn.test/from-worker.json').then(r => r.text())"
                   ".then(text => postMessage(text), e => postMessage('refused'));"
                   "setTimeout(() => { throw new RangeError('worker failure') }, 0);")

    def answer(url):
        if url == "https://course.test/page.html":
            return Reply(200, "<script>const w = new Worker('worker.js');"
                              "w.onmessage = e => document.title = e.data;</script>",
                         {"Content-Type": "text/html"})
        if url == "https://course.test/worker.js":
            return Reply(200, worker_code, {"Content-Type": "text/javascript"})
        if url == "https://cdn.test/from-worker.json":
            return Reply(200, "answered", {"Content-Type": "text/plain", "Access-Control-Allow-Origin": "*"})
        return REFUSE

    page = browser.new_page(intercept=answer)
    page.goto("https://course.test/page.html")
    assert page.wait_for("document.title", timeout=10, what="the worker's message") == "answered"
    page.wait_for("new Promise(done => setTimeout(() => done(true), 200))")
    assert any("RangeError: worker failure" in p for p in page.problems), page.problems
    page.close()


def test_a_full_page_screenshot_is_a_png_of_the_whole_page(browser, tmp_path):
    page = browser.new_page(width=400, height=300)
    page.goto("data:text/html,<body style='margin:0'><div style='height:1000px;background:red'></div></body>")
    target = tmp_path / "page.png"
    page.screenshot(target)
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (400, 1000)
    assert [p.name for p in tmp_path.iterdir()] == ["page.png"]  # no temporary file left
    page.close()


# ------------------------------------------------------------- nothing left behind


@needs_proc
def test_the_block_kills_the_whole_group_also_on_an_error(chromium_path):
    with pytest.raises(ZeroDivisionError):
        with Chromium(chromium_path) as opened:
            opened.new_page().goto("data:text/html,<p>hi</p>")
            group = opened.pid
            assert len(group_alive(group)) > 1  # the browser and its helper processes
            1 / 0
    assert group_alive(group) == []
    with pytest.raises(BrowserError, match="closed"):
        opened.send("Browser.getVersion")


HOLDER = """
import sys, time
sys.path.insert(0, {tools!r})
from chromium_pipe import Chromium
with Chromium({chromium!r}) as browser:
    browser.new_page().goto("data:text/html,<p>held</p>")
    print(browser.pid, browser._profile, flush=True)
    time.sleep(60)
"""


@needs_proc
@pytest.mark.parametrize("signum, exit_code", [(signal.SIGTERM, 128 + signal.SIGTERM),
                                               (signal.SIGINT, -signal.SIGINT),
                                               (signal.SIGKILL, -signal.SIGKILL)],
                         ids=["SIGTERM", "Ctrl-C", "SIGKILL"])
def test_no_chromium_is_left_when_the_python_is_stopped(chromium_path, signum, exit_code):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER.format(tools=str(ROOT / "tools"),
                                                                  chromium=chromium_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        group, profile = holder.stdout.readline().split()
        group, profile = int(group), Path(profile)
        assert group_alive(group) and profile.is_dir()
        holder.send_signal(signum)
        assert holder.wait(timeout=20) == exit_code, holder.stderr.read()
        # SIGTERM and Ctrl-C: the block's end killed the group and removed the profile;
        # SIGKILL: Chromium saw its pipe close and ended itself (the profile stays).
        assert wait_until_gone(group) == []
        assert profile.is_dir() == (signum == signal.SIGKILL)
    finally:
        holder.kill()
        holder.wait()
        shutil.rmtree(profile, ignore_errors=True)
