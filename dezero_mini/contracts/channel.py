"""The authenticated result channel between the checker and its worker.

The worker writes its events as lines on a pipe of its own (a descriptor
passed with ``pass_fds``, not standard output: what the learner's file prints
never reaches it). Each line is ``SEQUENCE MAC JSON``: the MAC is an HMAC-SHA256,
keyed with a secret that the parent makes for each run and sends to the
worker on its standard input before the learner's file is loaded (never in
argv or the environment, where ``/proc`` or a child would find it), over the
sequence number and the JSON. The parent rejects a line that does not verify,
or comes out of sequence, as tampering.
"""
import hashlib
import hmac
import json
import os
import secrets

#: The longest line that the reader waits for (the worker's longest event is a few KiB):
#: a longer one is tampering, said at once. Without a bound, a file that wrote
#: gigabytes without a newline on the channel had the grading process copy them
#: until its time limit ran out.
MAX_LINE_BYTES = 1 << 20


class Tampered(Exception):
    """A line on the result channel that the worker's checker did not sign."""


def new_key():
    """A fresh secret for one run."""
    return secrets.token_bytes(32)


def _mac(key, sequence, payload):
    return hmac.new(key, b"%d %s" % (sequence, payload), hashlib.sha256).hexdigest()


class Writer:
    """The worker's end: ``send(**event)``. Binds what it uses (``os.write``,
    ``json.dumps``, the MAC) when it is made, before the learner's file loads,
    so that replacing those functions later does not reach it."""

    def __init__(self, fd, key):
        self._fd, self._key, self._sequence = fd, key, 0
        self._write, self._dumps, self._mac = os.write, json.dumps, _mac

    def send(self, **event):
        payload = self._dumps(event).encode()
        line = b"%d %s %s\n" % (self._sequence, self._mac(self._key, self._sequence, payload).encode(),
                                 payload)
        self._sequence += 1
        while line:
            line = line[self._write(self._fd, line):]


class Reader:
    """The parent's end: ``read(line)`` returns the event of a line, or
    raises ``Tampered`` saying what is wrong with it."""

    def __init__(self, key):
        self._key, self._sequence = key, 0

    def check_pending(self, pending):
        """Raise ``Tampered`` when ``pending`` (what has come since the last
        newline) is already longer than any line of the checker's."""
        if len(pending) > MAX_LINE_BYTES:
            raise Tampered(f"a line longer than {MAX_LINE_BYTES} bytes: {pending[:80]!r}")

    def read(self, line):
        try:
            sequence, mac, payload = line.split(b" ", 2)
            sequence = int(sequence)
        except ValueError:
            raise Tampered(f"a line that is not the checker's: {line[:80]!r}") from None
        if not hmac.compare_digest(mac.decode("ascii", "replace"),
                                   _mac(self._key, sequence, payload)):
            raise Tampered(f"a line with a forged signature: {line[:80]!r}")
        if sequence != self._sequence:
            raise Tampered(f"line {sequence} where line {self._sequence} was due (a replay)")
        self._sequence += 1
        # Signed is not well formed: a file that found the key (full Python
        # can read its worker's memory) may sign anything, and every event
        # the parent reads is an object of JSON (its fields: _check_event).
        try:
            event = json.loads(payload)
        except ValueError:
            raise Tampered(f"a signed line that is not JSON: {payload[:80]!r}") from None
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            raise Tampered(f"a signed line that is not an event: {payload[:80]!r}")
        return event
