"""The child process of the checker: load a learner's file, run contracts.

``python -m dezero_mini.contracts.worker FILE STAGE BATCHES NAME...``

It talks to its parent (``dezero_mini.contracts.runner``) in JSON lines on
its original standard output, and sends everything else (what the
learner's file prints, to stdout or stderr) to standard error, which the
parent captures and truncates. Events, in order:

* ``{"event": "loaded"}``, or ``{"event": "error", "message": ...}`` when
  the file cannot be imported or lacks a name that the stage needs;
* per contract ``{"event": "start", "name": ...}`` then
  ``{"event": "result", "name", "passed", "expected", "measured", "error"}``
  (``error``: None, or what went wrong when the measurement raised).

The parent enforces the time limits: this process only has to report.
"""
import json
import os
import re
import sys
import traceback
from pathlib import Path

MESSAGE_LIMIT = 500


def _short(text, limit=MESSAGE_LIMIT):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def where_in(error, path):
    """``" (line 87 of step04.py)"``: the last line of ``path`` in the
    traceback of ``error``, or an empty string."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if Path(frame.filename).resolve() == path]
    return f" (line {frames[-1].lineno} of {path.name})" if frames else ""


def describe(error, path):
    """An exception in one line, with where the learner's file raised it."""
    name = type(error).__name__
    text = f"{name}: {error}" if str(error) else name
    return _short(text) + where_in(error, path)


def learner_module_name(path):
    """A module name for the learner's file that cannot clash with the
    course's own ``stepNN_<name>`` modules (stage 04's contracts load stage 03)."""
    return "learner_" + re.sub(r"\W", "_", path.stem)


def main(argv):
    path, number, batches, names = Path(argv[0]).resolve(), int(argv[1]), int(argv[2]), argv[3:]
    # The protocol keeps the real stdout; the learner's prints go to stderr.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def send(**event):
        protocol.write(json.dumps(event) + "\n")
        protocol.flush()

    from dezero_mini.contracts import contracts_at, missing_names
    from dezero_mini.contracts.bench import configure
    from dezero_mini.memory.stages import load_stage_file

    configure(batches=batches)
    sys.path.insert(0, str(path.parent))  # as when the file runs as a script
    try:
        module = load_stage_file(path, learner_module_name(path))
    except BaseException as error:  # SyntaxError, SystemExit, anything the file raises
        send(event="error", message=f"cannot load {path.name}: {describe(error, path)}")
        return 2
    missing = missing_names(module, number)
    if missing:
        send(event="error", message=(f"{path.name} lacks {', '.join(missing)}, which stage "
                                     f"{number:02d} needs: define "
                                     f"{'it' if len(missing) == 1 else 'them'} at the top level"))
        return 2
    send(event="loaded")

    by_name = {contract.name: contract for contract in contracts_at(number)}
    for name in names:
        send(event="start", name=name)
        try:
            found = by_name[name].check(module)
            send(event="result", name=name, passed=bool(found.passed), expected=found.expected,
                 measured=found.measured, error=None)
        except BaseException as error:  # the learner's code may raise anything, even SystemExit
            send(event="result", name=name, passed=False, expected=by_name[name].summary,
                 measured=f"raised {describe(error, path)}", error="raised")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
