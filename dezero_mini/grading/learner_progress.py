"""``progress``: where a learner is in the course, one line per stage.

For each stage with contracts, the learner's own file in a folder (the
stage's file name, ``stepNN_<name>.py``, as ``start`` writes it; or the one
file ``stepNN_*.py`` of that stage under another name), checked by
``check_file`` against that stage's contracts: which pass, which fail, and
the points. A stage without a file says how to begin it.
"""
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from dezero_mini.atomic import not_a_file
from dezero_mini.contracts import stages
from dezero_mini.contracts.scoring import display_points
from dezero_mini.hints import command_line
from dezero_mini.printable import printable


@dataclass
class StageProgress:
    """One stage of the course in a learner's folder: ``file`` (None when
    there is none) and, when there is one, its check ``report``."""

    number: int
    title: str
    file_name: str
    file: Optional[Path] = None
    report: object = None
    note: str = ""

    @property
    def done(self):
        return self.report is not None and self.report.status == "passed"


def stage_file(folder, stage):
    """The learner's file of ``stage`` in ``folder``: ``(path or None, note)``."""
    exact = folder / stage.file_name
    if exact.is_file():
        return exact, ""
    others = sorted(path for path in folder.glob(f"step{stage.number:02d}_*.py") if path.is_file())
    if len(others) == 1:
        return others[0], f"(named {others[0].name}, not {stage.file_name})"
    if others:
        return None, (f"{len(others)} files could be stage {stage.number:02d} ("
                      f"{', '.join(path.name for path in others)}): name one {stage.file_name}")
    what = not_a_file(exact)
    if what != "does not exist":  # the name is taken by no file: start would refuse it too
        return None, f"{stage.file_name} {what}; move it away, then"
    return None, ""


def progress(folder, check, on_stage=None, jobs=1, stop=None):
    """A ``StageProgress`` per stage, in course order; ``check(number, path)``
    returns a check report (``check_file`` with the options of the command);
    ``on_stage(progress)`` hears of each stage, in course order, as soon as it
    and every stage before it are done. ``jobs``: how many checks run at once
    (threads of this process: each check still runs the file in a worker and
    a sandbox of its own; the workers are what take the processors).
    ``stop()``, when given, is called when this thread is interrupted (Ctrl-C
    reaches it alone), to end the checks that other threads run (``check_file``'s
    ``stop`` event), before the interruption goes on up."""
    items = []
    for stage in stages():
        path, note = stage_file(Path(folder), stage)
        items.append(StageProgress(stage.number, stage.title, stage.file_name, path, note=note))
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as executor:
        reports = {item.number: executor.submit(check, item.number, item.file)
                   for item in items if item.file is not None}
        try:
            for item in items:
                if item.file is not None:
                    item.report = reports[item.number].result()
                if on_stage:
                    on_stage(item)
        except BaseException:
            for future in reports.values():
                future.cancel()
            if stop is not None:
                stop()
            raise
    return items


def progress_line(item):
    """One line for a stage: what is there, what passes, what fails. The
    names of the learner's files and what the file raised are in it: its
    control characters are shown as escapes (``printable``), so that a file
    name or an exception cannot redraw the terminal."""
    return printable(_progress_text(item), newlines=False)


def _progress_text(item):
    head = f"stage {item.number:02d} {item.title:<18}"
    if item.file is None:
        return f"{head}  {item.note or 'not started'}: {command_line('start', item.number)}"
    report = item.report
    passed = sum(result.passed for result in report.results)
    line = (f"{head}  {passed}/{len(report.results)} contracts pass, "
            f"{display_points(report.points)}/{display_points(report.max_points)} points")
    if item.note:
        line += f"  {item.note}"
    if report.reference is not None:
        line += f"  (the course's own {report.reference}: no grade)"
    if report.status == "error":
        return f"{line}; cannot be checked: {report.message}"
    failing = [result.name for result in report.results if not result.passed]
    return line + (f"; fails: {', '.join(failing)}" if failing else "; done")


def progress_summary(items):
    started = [item for item in items if item.file is not None]
    done = [item for item in items if item.done]
    return (f"{len(done)} of {len(items)} stages pass every contract; "
            f"{len(started)} {'has' if len(started) == 1 else 'have'} a file")
