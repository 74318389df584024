"""The system's headless Chromium, driven by Selenium through the system's chromedriver.

The site's checks (tools/check_site.py) and the browser tests need a few things
from a real browser: open a page and wait for its load event, wait for a
condition, evaluate JavaScript, hear what went wrong on the page (console
errors, uncaught exceptions, failed requests, HTTP errors), answer or refuse
its requests (so that a test never uses the network), type into it and take a
screenshot. Selenium does the driving; this module only finds the two programs,
words what the browser logged as the checks report it, and keeps every wait
under a deadline whose error names what was awaited.

Why Selenium and not Playwright: Selenium with Debian's chromium-driver adds
44 MiB to a virtual environment, Playwright 167 MiB (its own Node.js), and
the test environment may not grow past 450 MB.

How: pages are opened and evaluated with WebDriver BiDi (browsingContext.navigate,
script.evaluate): a classic command would hold chromedriver while an intercepted
request waits for its answer; what the page logged is read with chromedriver's
``get_log("browser")``, which holds every entry logged before the command
that asks for it, so nothing depends on when an event arrives.

    with Browser() as browser:
        page = browser.new_page()
        page.goto("http://127.0.0.1:8000/index.html")
        page.evaluate("document.title")
        page.problems        # ["console error: ...", "HTTP 404: ...", ...]
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from dezero_mini import atomic

CHROMIUM_ENV = "DEZERO_MINI_CHROMIUM"
CHROMEDRIVER_ENV = "DEZERO_MINI_CHROMEDRIVER"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
# Debian's chromium-driver puts it on PATH; some distributions keep it beside the browser.
CHROMEDRIVER_PLACES = ("chromedriver", "/usr/lib/chromium/chromedriver", "/usr/lib/chromium-browser/chromedriver")
INSTALL_HINT = (f"make chromium installs both with apt-get as root; else `sudo apt-get install chromium "
                f"chromium-driver`, or set {CHROMIUM_ENV} and {CHROMEDRIVER_ENV}")
#: Seconds that a page load or a condition may take by default: a bound that only ends
#: a hang (a local page loads in well under a second idle, seconds on a busy machine).
DEFAULT_TIMEOUT = 120.0
# A browser that is only a test instrument: no sandbox (the tests run as root in
# containers), no traffic of its own, no scrollbars (the width of the page is the
# width of the window, whatever the platform draws).
_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
          "--disable-background-networking", "--disable-extensions", "--disable-sync",
          "--mute-audio", "--hide-scrollbars", "--disable-component-update", "--password-store=basic")


class BrowserError(RuntimeError):
    """Chromium could not be started, went away, or refused a command."""


class BrowserTimeout(BrowserError):
    """Something awaited did not happen in time (the message names it)."""


class PageError(BrowserError):
    """JavaScript evaluated in the page threw (the message is the page's)."""


def _executable(value: str | None) -> str | None:
    """The path of ``value`` (a name on PATH or a path) when it is an executable file."""
    if not value:
        return None
    found = shutil.which(value)
    return found if found and Path(found).is_file() else None


def find_chromium() -> tuple[str | None, str]:
    """(path of a Chromium, "") when both it and a chromedriver are there, or (None, why
    not and how to install them), in one line."""
    override = os.environ.get(CHROMIUM_ENV)
    if override:
        browser = _executable(override)
        if browser is None:
            return None, f"{CHROMIUM_ENV}={override} is not an executable file ({INSTALL_HINT})"
    else:
        browser = next(filter(None, map(_executable, CHROMIUM_NAMES)), None)
        if browser is None:
            return None, f"no Chromium on PATH ({INSTALL_HINT})"
    driver, why = find_chromedriver()
    return (browser, "") if driver else (None, why)


def find_chromedriver() -> tuple[str | None, str]:
    """(path of chromedriver, "") or (None, why there is none and how to install it)."""
    override = os.environ.get(CHROMEDRIVER_ENV)
    if override:
        found = _executable(override)
        return (found, "") if found else (
            None, f"{CHROMEDRIVER_ENV}={override} is not an executable file ({INSTALL_HINT})")
    found = next(filter(None, map(_executable, CHROMEDRIVER_PLACES)), None)
    return (found, "") if found else (None, f"no chromedriver on PATH ({INSTALL_HINT})")


@dataclass
class Reply:
    """What a request intercepted by ``new_page(intercept=...)`` is answered with."""
    status: int = 200
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)


#: Returned by an ``intercept`` function: the request fails as if the network were down.
REFUSE = "refuse"


def _first_line(exc: BaseException) -> str:
    text = (getattr(exc, "msg", None) or str(exc)).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Browser:
    """A headless Chromium (and its chromedriver), open for the time of a ``with`` block;
    both are ended when the block ends, however it ends."""

    def __init__(self, executable: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 extra_args: tuple[str, ...] = ()):
        if executable is None:
            executable, why = find_chromium()
            if executable is None:
                raise BrowserError(why)
        self.executable = executable
        self.timeout = timeout
        self._extra_args = tuple(extra_args)
        self._driver = None
        self._profile: str | None = None
        self._page: Page | None = None
        self._size: tuple[int, int] | None = None  # the window's CSS pixels, once set

    def __enter__(self) -> "Browser":
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _start(self) -> None:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.service import Service

        driver_path, why = find_chromedriver()
        if driver_path is None:
            raise BrowserError(why)
        if _executable(self.executable) is None:
            raise BrowserError(f"cannot start Chromium: {self.executable} is not an executable "
                               f"file ({INSTALL_HINT})")
        self._profile = tempfile.mkdtemp(prefix="dezero-mini-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = self.executable
        for flag in (*_FLAGS, f"--user-data-dir={self._profile}", *self._extra_args):
            options.add_argument(flag)
        options.enable_bidi = True  # navigation and request interception (see the docstring)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        try:
            # Both paths given: Selenium Manager, which would download a driver, is not asked.
            self._driver = webdriver.Chrome(options=options, service=Service(driver_path))
            self._driver.set_page_load_timeout(self.timeout)
            self._driver.set_script_timeout(self.timeout)
        except WebDriverException as exc:
            raise BrowserError(f"cannot start {self.executable} with {driver_path}: {_first_line(exc)}") from None

    def close(self) -> None:
        """End chromedriver and Chromium and remove the profile (safe to call twice)."""
        driver, self._driver = self._driver, None
        try:
            if driver is not None:
                driver.quit()
        finally:
            if self._profile is not None:
                shutil.rmtree(self._profile, ignore_errors=True)
                self._profile = None

    @property
    def driver(self):
        """The Selenium WebDriver (BrowserError once the browser is closed)."""
        if self._driver is None:
            raise BrowserError("the browser is closed")
        return self._driver

    def new_page(self, *, width: int = 1280, height: int = 900, isolated: bool = True,
                 intercept: Callable[[str], Reply | str | None] | None = None) -> "Page":
        """A blank tab of ``width`` x ``height`` CSS pixels (the one tab: an earlier page is
        closed). ``intercept(url)``, when given, sees every request first and returns a Reply
        to answer it, REFUSE to fail it, or None to let it through. ``isolated`` is kept for
        the callers of the former client: every page starts from the same fresh profile."""
        if self._page is not None:
            self._page.close()
        self._page = Page(self, width, height, intercept)
        return self._page


# What chromedriver's browser log says, and how the checks word it.
_POSITION = re.compile(r"^(?P<url>\S+) (?P<line>\d+):(?P<column>\d+) (?P<text>.*)$", re.S)
_HTTP_STATUS = re.compile(r"^(?P<url>\S+) - Failed to load resource: the server responded with a status "
                          r"of (?P<status>\d+)")
_FAILED_LOAD = re.compile(r"^(?P<url>\S+) - Failed to load resource: (?P<error>.*)$")


def _console_text(text: str) -> str:
    """A console call's arguments as the page gave them: chromedriver quotes a string
    argument as JSON ("boom" 3); the quotes are taken off."""
    parts, rest = [], text.strip()
    while rest:
        if rest.startswith('"'):
            try:
                value, end = json.JSONDecoder().raw_decode(rest)
            except ValueError:
                parts.append(rest)
                break
            parts.append(str(value))
            rest = rest[end:].strip()
        else:
            word, _, rest = rest.partition(" ")
            parts.append(word)
    return " ".join(parts)


def log_problem(entry: dict) -> str | None:
    """One entry of chromedriver's browser log in the checks' words, or None when it is
    no problem (below SEVERE, or the browser's own request for /favicon.ico, which a page
    that names no icon does not make: an icon a page names is checked as a link)."""
    if entry.get("level") != "SEVERE":
        return None
    message, source = entry.get("message", ""), entry.get("source")
    if source == "network":
        status, failed = _HTTP_STATUS.match(message), _FAILED_LOAD.match(message)
        url = (status or failed).group("url") if (status or failed) else ""
        if url.split("?")[0].endswith("/favicon.ico"):
            return None
        if status:
            return f"HTTP {status.group('status')}: {url}"
        if failed:
            return f"request failed: {url} ({failed.group('error')})"
    where = _POSITION.match(message)
    if source == "javascript" and where:
        text = where.group("text").removeprefix("Uncaught ")
        return f"uncaught error: {text} (at {where.group('url')}:{int(where.group('line')) + 1})"
    if source == "console-api" and where:
        return f"console error: {_console_text(where.group('text'))}"
    return f"console error: {message}"


class Page:
    """The browser's tab. ``problems`` says, in words, what went wrong on it since it
    opened: "console error: ...", "uncaught error: ...", "request failed: URL", "HTTP 404: URL"."""

    def __init__(self, browser: Browser, width: int, height: int, intercept):
        self._browser = browser
        self._driver = driver = browser.driver
        self._heard: list[str] = []
        self._handler = None
        # The tab's BiDi context, read once: a classic command would wait for a navigation.
        self._context = driver.current_window_handle
        self.closed = False
        driver.get_log("browser")  # what an earlier page left is not this one's
        if browser._size != (width, height):
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
            browser._size = (width, height)
        if intercept is not None:
            self._handler = driver.network.add_request_handler(self._answerer(intercept))

    def _answerer(self, intercept):
        def answer(request) -> None:
            try:
                decision = intercept(request.url)
            except Exception as exc:  # the test's own function failed: the request fails, the page says why
                self._heard.append(f"intercept({request.url!r}) raised {exc!r}")
                decision = REFUSE
            if isinstance(decision, Reply):
                request.provide_response(status=decision.status, headers=decision.headers, body=decision.body)
            elif decision is not None:
                if decision is not REFUSE:
                    self._heard.append(f"intercept({request.url!r}) returned {decision!r}, "
                                       "not a Reply, REFUSE or None: the request was refused")
                request.fail()
        return answer

    @property
    def problems(self) -> list[str]:
        """What went wrong on the page up to now (read from the browser's log)."""
        if not self.closed:
            self._read_log()
        return list(self._heard)

    def _read_log(self) -> None:
        for entry in self._driver.get_log("browser"):
            problem = log_problem(entry)
            if problem:
                self._heard.append(problem)

    def goto(self, url: str, *, timeout: float | None = None) -> None:
        """Open ``url`` and wait for the load event of the document the tab then shows."""
        from selenium.common.exceptions import WebDriverException

        try:
            self._driver.browsing_context.navigate(context=self._context,
                                                   url=url, wait="complete")
        except WebDriverException as exc:
            raise BrowserError(f"could not open {url}: {_first_line(exc)}") from None

    def evaluate(self, expression: str, *, timeout: float | None = None, what: str | None = None):
        """The value (as JSON) of a JavaScript expression in the page; a promise is awaited.
        PageError with the page's message when it throws, or when the page is between two
        documents. Through WebDriver BiDi, as navigation: a classic command would wait for a
        navigation under way, whose intercepted requests wait for chromedriver in turn."""
        from selenium.common.exceptions import WebDriverException

        wrapped = f"(async () => JSON.stringify(await ({expression})))()"
        try:
            raw = self._driver.script.evaluate(expression=wrapped, await_promise=True,
                                               target={"context": self._context})
        except WebDriverException as exc:
            raise PageError(f"the page could not evaluate {_short(expression)}: {_first_line(exc)}") from None
        if raw.get("type") == "exception":
            details = raw.get("exceptionDetails", {})
            raise PageError(f"{_short(expression)} threw in the page: {details.get('text', '(no message)')}")
        value = raw.get("result", {})
        return json.loads(value["value"]) if value.get("type") == "string" else None

    def wait_for(self, expression: str, *, timeout: float | None = None, what: str | None = None,
                 every: float = 0.05):
        """Evaluate ``expression`` until its value is truthy, and return that value.
        BrowserTimeout names ``what`` (or the expression) and the page's address when it
        is not within ``timeout`` s."""
        timeout = self._browser.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(expression, what=what)
            except PageError:  # the page is between two documents
                value = None
            if value:
                return value
            if time.monotonic() >= deadline:
                raise BrowserTimeout(f"timed out after {timeout:g} s waiting for "
                                     f"{what or _short(expression)} on {self.url}")
            time.sleep(every)

    @property
    def url(self) -> str:
        """The address the page shows now."""
        tree = self._driver.browsing_context.get_tree(root=self._context, max_depth=0)
        return tree[0].url if tree else ""

    def type(self, text: str) -> None:
        """Type ``text`` into the focused element, a key down and up per character."""
        self._driver.switch_to.active_element.send_keys(text)

    def screenshot(self, path: Path, *, full_page: bool = True) -> None:
        """Save the page as PNG (the whole page, or the window), written whole or not at all."""
        params = {"format": "png", "captureBeyondViewport": full_page}
        if full_page:
            size = self._driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        data = base64.b64decode(self._driver.execute_cdp_cmd("Page.captureScreenshot", params)["data"])
        atomic.write_bytes(Path(path), data)

    def close(self) -> None:
        """Stop intercepting, keep what the page logged, and leave it (safe to call twice)."""
        if self.closed:
            return
        self._read_log()
        if self._handler is not None:
            self._driver.network.remove_request_handler(self._handler)
            self._handler = None
        self.closed = True


def _short(expression: str, width: int = 60) -> str:
    text = " ".join(expression.split())
    return repr(text if len(text) <= width else text[:width - 3] + "...")
