"""Headless Chromium driven over the Chrome DevTools Protocol, with the standard library only.

The site's checks (tools/check_site.py) and the browser tests need a few things
from a real browser: open a page and wait for its load event, wait for a
condition, evaluate JavaScript, hear what went wrong on the page (console
errors, uncaught exceptions, failed requests, HTTP errors), answer or refuse
its requests (so that a test never uses the network), type into it and take a
screenshot. This module does just that, and nothing else.

How it talks to the browser: Chromium started with ``--remote-debugging-pipe``
reads protocol commands from its file descriptor 3 and writes replies and
events to its file descriptor 4, each message one JSON text ended by a NUL
byte (no HTTP port, no WebSocket). Commands to a page go through a "flat"
session (``Target.attachToTarget`` with ``flatten``): the message carries the
page's ``sessionId``. The commands and events used here are those of the
protocol's reference, https://chromedevtools.github.io/devtools-protocol/
(Target, Page, Runtime, Log, Network, Fetch, Emulation, Input, Inspector).

POSIX only (Linux, macOS): the pipe's two ends are handed over as file
descriptors.

Nothing is left running: Chromium is started in a process group of its own
(so that a Ctrl-C in the terminal does not reach it half-way) and the whole
group is killed when the ``Chromium`` block ends, however it ends: normally,
on an error, on Ctrl-C (KeyboardInterrupt), or on SIGTERM, which is turned
into SystemExit while a browser is open. Every wait has a deadline, and the
error on a timeout names what it waited for.

    with Chromium(find_chromium()[0]) as browser:
        page = browser.new_page()
        page.goto("http://127.0.0.1:8000/index.html")
        page.evaluate("document.title")
        page.problems        # ["console error: ...", "HTTP 404: ...", ...]
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

CHROMIUM_ENV = "DEZERO_MINI_CHROMIUM"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
INSTALL_HINT = (f"make installs it with apt-get as root; else `sudo apt-get install chromium`, "
                f"or set {CHROMIUM_ENV} to a Chromium or Chrome")
#: Seconds that a command, a page load or a condition may take by default.
DEFAULT_TIMEOUT = 30.0
# Flags of a browser that is only a test instrument: no sandbox (the tests run as
# root in containers), no first-run dialogs, no traffic of its own, no scrollbars
# (the width of the page is the width of the window, whatever the platform draws).
_FLAGS = ("--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
          "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
          "--disable-extensions", "--disable-sync", "--mute-audio", "--hide-scrollbars",
          "--disable-component-update", "--password-store=basic", "about:blank")


# Run as the child: move the pipe ends given as argv[1:3] to 3 and 4, exec argv[3:].
_TRAMPOLINE = ("import os, sys; a, b = int(sys.argv[1]), int(sys.argv[2]); "
               "os.dup2(a, 3); os.dup2(b, 4); os.close(a); os.close(b); "
               "os.execv(sys.argv[3], sys.argv[3:])")


class BrowserError(RuntimeError):
    """Chromium could not be started, went away, or refused a command."""


class BrowserTimeout(BrowserError):
    """Something awaited did not happen in time (the message names it)."""


class PageError(BrowserError):
    """JavaScript evaluated in the page threw (the message is the page's)."""


def find_chromium() -> tuple[str | None, str]:
    """(path of a Chromium, "") or (None, why there is none and how to install one), in one line."""
    override = os.environ.get(CHROMIUM_ENV)
    if override:
        if Path(override).is_file() and os.access(override, os.X_OK):
            return override, ""
        return None, f"{CHROMIUM_ENV}={override} is not an executable file ({INSTALL_HINT})"
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found, ""
    return None, f"no Chromium on PATH ({INSTALL_HINT})"


@dataclass
class Reply:
    """What a request intercepted by ``new_page(intercept=...)`` is answered with."""
    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=dict)


#: Returned by an ``intercept`` function: the request fails as if the network were down.
REFUSE = "refuse"


class Chromium:
    """A headless Chromium, open for the time of a ``with`` block."""

    def __init__(self, executable: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 extra_args: tuple[str, ...] = ()):
        if executable is None:
            executable, why = find_chromium()
            if executable is None:
                raise BrowserError(why)
        self.executable = executable
        self.timeout = timeout
        self._extra_args = tuple(extra_args)
        self._process: subprocess.Popen | None = None
        self._profile: str | None = None
        self._stderr = None
        self._to_browser = self._from_browser = -1
        self._buffer = b""
        self._next_id = 0
        self._replies: dict[int, dict] = {}
        self._awaited: set[int] = set()  # ids of the commands whose reply someone waits for
        self._pages: dict[str, Page] = {}
        self._selector: selectors.BaseSelector | None = None
        self._old_sigterm = None

    # ----------------------------------------------------------- start and stop

    def __enter__(self) -> "Chromium":
        self._catch_sigterm()
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The process id of Chromium (also the id of its process group), or None before the start."""
        return self._process.pid if self._process else None

    def _start(self) -> None:
        if not (Path(self.executable).is_file() and os.access(self.executable, os.X_OK)):
            raise BrowserError(f"cannot start Chromium: {self.executable} is not an executable "
                               f"file ({INSTALL_HINT})")
        self._profile = tempfile.mkdtemp(prefix="dezero-mini-chromium-")
        self._stderr = tempfile.TemporaryFile()
        commands_read, commands_write = os.pipe()   # we write, Chromium reads (its fd 3)
        replies_read, replies_write = os.pipe()     # Chromium writes (its fd 4), we read
        # Chromium's ends moved above 9, so that moving them to 3 and 4 cannot overwrite one another.
        commands_read, replies_write = (_above_nine(fd) for fd in (commands_read, replies_write))
        # A small Python puts the two ends at 3 and 4, then becomes Chromium (exec): no
        # preexec_fn, which is unsafe in a process with threads (the test server's), and
        # no shell, whose redirections take only one-digit descriptors.
        argv = [sys.executable, "-I", "-S", "-c", _TRAMPOLINE, str(commands_read), str(replies_write),
                self.executable, *_FLAGS[:-1], f"--user-data-dir={self._profile}", *self._extra_args,
                _FLAGS[-1]]
        try:
            self._process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
                pass_fds=(commands_read, replies_write), start_new_session=True)
        finally:
            os.close(commands_read)
            os.close(replies_write)
        self._to_browser, self._from_browser = commands_write, replies_read
        os.set_blocking(self._from_browser, False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._from_browser, selectors.EVENT_READ)
        os.set_blocking(self._to_browser, False)  # a Chromium that stops reading cannot block us
        try:
            self.send("Browser.getVersion", what="Chromium to start and answer on its pipe")
        except BrowserError as exc:
            raise type(exc)(f"{exc}\n  started as: {self.executable}") from None

    def close(self) -> None:
        """Kill Chromium's whole process group and remove its profile (safe to call twice)."""
        try:
            if self._process is not None:
                try:
                    os.killpg(self._process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                self._process.wait()
            for fd in (self._to_browser, self._from_browser):
                if fd >= 0:
                    os.close(fd)
            self._to_browser = self._from_browser = -1
            if self._selector is not None:
                self._selector.close()
                self._selector = None
            if self._stderr is not None:
                self._stderr.close()
                self._stderr = None
            if self._profile is not None:
                shutil.rmtree(self._profile, ignore_errors=True)
                self._profile = None
        finally:
            self._restore_sigterm()

    def _catch_sigterm(self) -> None:
        """While the browser is open, SIGTERM raises SystemExit (so ``close`` runs) instead of
        ending Python at once, which would leave Chromium behind. Only where a handler may be set
        (the main thread) and nobody set one already."""
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def raise_exit(signum, frame):
            raise SystemExit(128 + signum)

        self._old_sigterm = signal.signal(signal.SIGTERM, raise_exit)

    def _restore_sigterm(self) -> None:
        if self._old_sigterm is not None:
            signal.signal(signal.SIGTERM, self._old_sigterm)
            self._old_sigterm = None

    # ----------------------------------------------------------- the pipe

    def _last_words(self) -> str:
        """The end of what Chromium wrote to stderr, for error messages."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        lines = [line for line in self._stderr.read().decode(errors="replace").splitlines() if line.strip()]
        return ("; its last words: " + " | ".join(lines[-3:])) if lines else ""

    def _gone(self, what: str) -> BrowserError:
        code = self._process.poll() if self._process else None
        if code is None and self._process is not None:
            try:
                code = self._process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                code = None
        how = f"exited with code {code}" if code is not None else "closed its pipe"
        return BrowserError(f"Chromium {how} while we waited for {what}{self._last_words()}")

    def _post(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        """Send a command without waiting for its reply; return its id."""
        if self._to_browser < 0:
            raise BrowserError(f"Chromium is closed: cannot send {method}")
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        deadline = time.monotonic() + self.timeout
        while data:
            try:
                data = data[os.write(self._to_browser, data):]
            except BlockingIOError:  # the pipe is full: wait until Chromium reads some of it
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([], [self._to_browser], [], left)[1]:
                    raise BrowserTimeout(f"timed out after {self.timeout:g} s waiting for "
                                         f"Chromium to read {method}") from None
            except OSError:  # BrokenPipeError: Chromium has gone
                raise self._gone(f"it to read {method}") from None
        return self._next_id

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             *, timeout: float | None = None, what: str | None = None) -> dict:
        """Send a command and return its result; BrowserTimeout names ``what`` (or the command)."""
        command_id = self._post(method, params, session)
        self._awaited.add(command_id)
        what = what or f"the answer to {method}"
        page = self._pages.get(session) if session else None

        def answered() -> bool:
            if page is not None:
                page._check_alive(what)  # a crashed page answers nothing: say so at once
            return command_id in self._replies

        try:
            self.pump(answered, timeout, what)
        finally:
            self._awaited.discard(command_id)
        reply = self._replies.pop(command_id)
        if "error" in reply:
            raise BrowserError(f"Chromium refused {method}: {reply['error'].get('message', reply['error'])}")
        return reply.get("result", {})

    def pump(self, done: Callable[[], bool], timeout: float | None, what: str) -> None:
        """Read and dispatch messages until ``done()`` is true; BrowserTimeout after ``timeout`` s."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserTimeout(f"timed out after {timeout:g} s waiting for {what}")
            self._read(min(left, 0.1), what)

    def _read(self, wait: float, what: str) -> None:
        """Dispatch every whole message that arrives within ``wait`` seconds (``what``: the
        thing awaited, for the error if Chromium goes away)."""
        if self._selector is None:
            raise BrowserError("Chromium is closed")
        if not self._selector.select(wait):
            return
        try:
            chunk = os.read(self._from_browser, 1 << 20)
        except BlockingIOError:
            return
        if not chunk:
            raise self._gone(what)
        self._buffer += chunk
        *messages, self._buffer = self._buffer.split(b"\0")
        for raw in messages:
            message = json.loads(raw)
            if "id" in message:
                if message["id"] in self._awaited:  # else the reply to a command posted without waiting
                    self._replies[message["id"]] = message
            elif message.get("sessionId") in self._pages:
                self._pages[message["sessionId"]]._on_event(message["method"], message.get("params", {}))

    # ----------------------------------------------------------- pages

    def new_page(self, *, width: int = 1280, height: int = 900, isolated: bool = True,
                 intercept: Callable[[str], Reply | str | None] | None = None) -> "Page":
        """A blank page of ``width`` x ``height`` CSS pixels, in a browser context of its
        own (no cookie, storage or cache shared with another page), or with
        ``isolated=False`` in the browser's default context, shared by all such pages
        (as a reader's tabs share theirs; quicker to open). ``intercept(url)``, when
        given, sees every request first and returns a Reply to answer it, REFUSE to
        fail it, or None to let it through."""
        context = self.send("Target.createBrowserContext")["browserContextId"] if isolated else None
        target = self.send("Target.createTarget", {"url": "about:blank", **(
            {"browserContextId": context} if context else {})})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session, target, context, intercept)
        self._pages[session] = page
        for method in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable", "Inspector.enable"):
            self.send(method, session=session)
        self.send("Page.setLifecycleEventsEnabled", {"enabled": True}, session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        if intercept is not None:
            self.send("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}, session)
        return page


def _above_nine(fd: int) -> int:
    """A copy of ``fd`` numbered 10 or more (not inherited unless passed); ``fd`` is closed."""
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    finally:
        os.close(fd)


def _is_own_favicon_request(url: str, params: dict) -> bool:
    """Whether a request is the one Chromium makes by itself for /favicon.ico after a page
    that names no icon: not the page's doing (a reader never sees it fail), so not a problem
    of the page. An icon that a page names in a <link> is its own request, and fails as one."""
    return (urlsplit(url).path == "/favicon.ico" and params.get("type") == "Other"
            and params.get("initiator", {}).get("type") == "other")


def _exception_text(details: dict) -> str:
    """An exception's first line (its class and message), and where it was thrown when in a script."""
    description = details.get("exception", {}).get("description") or details.get("text", "")
    text = description.splitlines()[0] if description else "(no message)"
    url = details.get("url", "")
    if url and not url.startswith("data:"):
        text += f" (at {url}:{details.get('lineNumber', 0) + 1})"
    return text


def _console_text(args: list[dict]) -> str:
    return " ".join(str(arg["value"]) if "value" in arg else arg.get("description", arg.get("type", ""))
                    for arg in args)


class Page:
    """One tab. ``problems`` collects, in words, what went wrong on it since it opened:
    "console error: ...", "uncaught error: ...", "request failed: URL", "HTTP 404: URL"."""

    def __init__(self, browser: Chromium, session: str, target: str, context: str | None, intercept):
        self._browser = browser
        self._session = session
        self._target = target
        self._context = context
        self._intercept = intercept
        self._urls: dict[str, str] = {}  # request id -> URL
        self._loads: set[str] = set()    # loader ids whose load event fired
        self._shown: str | None = None   # loader id of the document the tab shows (its main frame's)
        self._own_requests: set[str] = set()  # request ids of the browser's own favicon requests
        self._crashed = False
        self._opened = "about:blank"  # the last address given to goto
        self.problems: list[str] = []
        self.failed_requests: list[str] = []
        self.closed = False

    def _on_event(self, method: str, params: dict) -> None:
        if method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.problems.append(f"console error: {_console_text(params.get('args', []))}")
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            if params["entry"].get("networkRequestId") not in self._own_requests:
                self.problems.append(f"console error: {params['entry'].get('text', '')}")
        elif method == "Runtime.exceptionThrown":
            self.problems.append(f"uncaught error: {_exception_text(params.get('exceptionDetails', {}))}")
        elif method == "Network.requestWillBeSent":
            self._urls[params["requestId"]] = url = params["request"]["url"]
            if _is_own_favicon_request(url, params):
                self._own_requests.add(params["requestId"])
        elif params.get("requestId") in self._own_requests:
            return
        elif method == "Network.responseReceived" and params["response"]["status"] >= 400:
            self.problems.append(f"HTTP {params['response']['status']}: {params['response']['url']}")
        elif method == "Network.loadingFailed":
            url = self._urls.get(params["requestId"], "(unknown URL)")
            self.failed_requests.append(url)
            self.problems.append(f"request failed: {url} ({params.get('errorText', '')})")
        elif method == "Page.lifecycleEvent" and params.get("name") == "load":
            self._loads.add(params.get("loaderId", ""))
        elif method == "Page.frameNavigated" and not params["frame"].get("parentId"):
            self._shown = params["frame"].get("loaderId")
        elif method == "Inspector.targetCrashed":
            self._crashed = True
        elif method == "Fetch.requestPaused":
            self._answer(params)

    def _answer(self, params: dict) -> None:
        """Answer an intercepted request as ``intercept`` says (without waiting for Chromium's reply)."""
        request_id, url = params["requestId"], params["request"]["url"]
        try:
            decision = self._intercept(url)
        except Exception as exc:  # the test's own function failed: the request fails, the page says why
            self.problems.append(f"intercept({url!r}) raised {exc!r}")
            decision = REFUSE
        if decision is None:
            self._browser._post("Fetch.continueRequest", {"requestId": request_id}, self._session)
        elif isinstance(decision, Reply):
            body = decision.body.encode() if isinstance(decision.body, str) else decision.body
            headers = [{"name": k, "value": v} for k, v in decision.headers.items()]
            self._browser._post("Fetch.fulfillRequest", {
                "requestId": request_id, "responseCode": decision.status, "responseHeaders": headers,
                "body": base64.b64encode(body).decode()}, self._session)
        else:
            if decision is not REFUSE:
                self.problems.append(f"intercept({url!r}) returned {decision!r}, "
                                     "not a Reply, REFUSE or None: the request was refused")
            self._browser._post("Fetch.failRequest", {"requestId": request_id, "errorReason": "Failed"},
                                self._session)

    def _send(self, method: str, params: dict | None = None, *, timeout: float | None = None,
              what: str | None = None) -> dict:
        if self.closed:
            raise BrowserError(f"the page is closed: cannot send {method}")
        return self._browser.send(method, params, self._session, timeout=timeout, what=what)

    def _check_alive(self, what: str) -> bool:
        if self._crashed:
            raise BrowserError(f"the page crashed while we waited for {what}")
        return False

    def goto(self, url: str, *, timeout: float | None = None) -> None:
        """Open ``url`` and wait for the load event (every image, script and style loaded or
        failed) of the document the tab then shows: ``url``'s, or, when ``url`` sends the tab
        on at once (a script's location.replace), the one it was sent to."""
        self._shown, self._opened = None, url
        result = self._send("Page.navigate", {"url": url}, timeout=timeout, what=f"Chromium to start loading {url}")
        if result.get("errorText"):
            raise BrowserError(f"could not open {url}: {result['errorText']}")
        loader = result.get("loaderId")
        if loader is None:  # a move inside the same document: nothing more to load
            return
        if self._shown is None:
            self._shown = loader
        what = f"the load event of {url}"
        self._browser.pump(lambda: self._check_alive(what) or self._shown in self._loads, timeout, what)

    def evaluate(self, expression: str, *, timeout: float | None = None, what: str | None = None):
        """The value (as JSON) of a JavaScript expression in the page; a promise is awaited.
        PageError with the page's message when it throws."""
        result = self._send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                 "awaitPromise": True},
                            timeout=timeout, what=what or f"the page to evaluate {_short(expression)}")
        if "exceptionDetails" in result:
            raise PageError(f"{_short(expression)} threw in the page: "
                            f"{_exception_text(result['exceptionDetails'])}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, *, timeout: float | None = None, what: str | None = None,
                 every: float = 0.05):
        """Evaluate ``expression`` until its value is truthy, and return that value.
        BrowserTimeout names ``what`` (or the expression) when it is not within ``timeout`` s."""
        timeout = self._browser.timeout if timeout is None else timeout
        what = what or _short(expression)
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive(what)
            try:
                value = self.evaluate(expression, timeout=max(deadline - time.monotonic(), 0.1), what=what)
            except PageError:  # the page is between two documents: its context went away
                value = None
            except BrowserTimeout:  # a busy page did not answer within the time left: the wait's own
                value, deadline = None, 0  # figure, not what was left of it (once: "after 0.280773 s")
            if value:
                return value
            if time.monotonic() >= deadline:
                raise BrowserTimeout(f"timed out after {timeout:g} s waiting for {what} on {self._address()}")
            self._idle(min(every, max(deadline - time.monotonic(), 0)), what)

    def _idle(self, seconds: float, what: str) -> None:
        """Dispatch messages (intercepted requests, console errors) for ``seconds``."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self._browser._read(left, what)

    @property
    def url(self) -> str:
        """The address the page shows now."""
        return self.evaluate("location.href")

    def _address(self) -> str:
        """Where the page is, for a message: its address if it answers within a
        second, else the last address opened (a page stuck in a script answers nothing)."""
        try:
            return self.evaluate("location.href", timeout=1)
        except BrowserError:
            return self._opened

    def type(self, text: str) -> None:
        """Type ``text`` into the focused element, one key down and up per character
        (as a reader's keyboard does: the page hears keydown, input and keyup)."""
        for char in text:
            self._send("Input.dispatchKeyEvent", {"type": "keyDown", "key": char, "text": char})
            self._send("Input.dispatchKeyEvent", {"type": "keyUp", "key": char})

    def screenshot(self, path: Path, *, full_page: bool = True) -> None:
        """Save the page as PNG (the whole page, or the window); written to a temporary file, then renamed."""
        params = {"format": "png"}
        if full_page:
            size = self._send("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        data = base64.b64decode(self._send("Page.captureScreenshot", params)["data"])
        path = Path(path)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.chmod(temporary, 0o644)  # mkstemp's 0o600 would hide the picture from other users
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def close(self) -> None:
        """Close the tab and its browser context."""
        if self.closed:
            return
        self._browser._pages.pop(self._session, None)
        self.closed = True
        self._browser.send("Target.closeTarget", {"targetId": self._target})
        if self._context is not None:
            self._browser.send("Target.disposeBrowserContext", {"browserContextId": self._context})


def _short(expression: str, width: int = 60) -> str:
    text = " ".join(expression.split())
    return repr(text if len(text) <= width else text[:width - 3] + "...")
