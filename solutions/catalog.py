"""Worked solutions: where they are, how they run, and how the book shows them.

Each lesson ``notebooks/NN_<name>.ipynb`` that ends with "## Exercises" has a
solutions file ``solutions/NN_<name>.py`` with one function per exercise,
``exercise_1``, ``exercise_2``, ...: its docstring says in two or three
sentences what the solution shows, its body is code a learner can paste into
a cell of the lesson, and it asserts what the exercise says you should see,
so that running it is its test::

    python solutions/03_weakref_outputs.py 2     # exercise 2
    python solutions/03_weakref_outputs.py       # every exercise of the lesson

A new lesson gets its solutions by adding its file; nothing here names a
lesson. ``tools/build_book.py`` folds each solution under its exercise
(``fold_solutions``), and ``tests/test_solutions.py`` runs every one and
checks that exercises and solutions match one to one.
"""
from __future__ import annotations

import ast
import json
import re
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOLUTION_GLOB = "[0-9][0-9]_*.py"
_FUNCTION = re.compile(r"exercise_(\d+)$")
_EXERCISES_HEADING = re.compile(r"^##\s+Exercises\s*$")
_NEXT_HEADING = re.compile(r"^#{1,2}\s")
_ITEM = re.compile(r"^(\d+)\.\s")
_FENCE = re.compile(r"^\s*(```|~~~)")


class SolutionError(ValueError):
    """Exercises and solutions do not match; the message says where."""


@dataclass
class Solution:
    number: int
    text: str  # the docstring: what the solution shows
    code: str  # the body without the docstring, dedented


def solutions_file(root: Path, stem: str) -> Path:
    """``<root>/solutions/<stem>.py``: the solutions of lesson ``stem``."""
    return Path(root) / "solutions" / f"{stem}.py"


def read_solutions(path: Path) -> dict[int, Solution]:
    """The solutions of a file, by exercise number, read without running it."""
    path = Path(path)
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found: dict[int, Solution] = {}
    for node in ast.parse(source, filename=str(path)).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        match = _FUNCTION.match(node.name)
        if not match:
            continue
        number = int(match.group(1))
        text = ast.get_docstring(node)
        if not text:
            raise SolutionError(f"{path.name}: {node.name} has no docstring saying what it shows")
        if number in found:
            raise SolutionError(f"{path.name}: two solutions of exercise {number}")
        body_start = node.body[1].lineno if len(node.body) > 1 else node.body[0].end_lineno + 1
        # Comments just above the first statement belong to the code.
        start = node.body[0].end_lineno  # (0-based index of the line after the docstring)
        code = textwrap.dedent("\n".join(lines[start:node.end_lineno])).strip("\n")
        if body_start > node.end_lineno or not code.strip():
            raise SolutionError(f"{path.name}: {node.name} has no code")
        found[number] = Solution(number, " ".join(text.split()), code)
    return found


def _exercise_items(markdown: str) -> list[tuple[int, int, int]]:
    """``(number, first line, line after the item)`` for each numbered item of
    the "## Exercises" section of ``markdown`` (0-based line indices)."""
    lines = markdown.splitlines()
    items, in_section, in_code = [], False, False
    section_end = len(lines)
    for k, line in enumerate(lines):
        if _FENCE.match(line):
            in_code = not in_code
        if in_code:
            continue
        if _EXERCISES_HEADING.match(line):
            in_section = True
            continue
        if in_section and _NEXT_HEADING.match(line):
            section_end = k
            break
        if in_section:
            match = _ITEM.match(line)
            if match:
                items.append([int(match.group(1)), k])
    if not in_section:
        return []
    spans = []
    for n, (number, start) in enumerate(items):
        end = items[n + 1][1] if n + 1 < len(items) else section_end
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        spans.append((number, start, end))
    return spans


def exercise_numbers(markdown: str) -> list[int]:
    """The numbers of the exercises in ``markdown`` (a lesson's Markdown)."""
    return [number for number, _, _ in _exercise_items(markdown)]


def lesson_exercises(notebook: Path) -> list[int]:
    """The numbers of the exercises of a stored lesson notebook (its Markdown cells)."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]
    sources = ("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
               for c in cells if c["cell_type"] == "markdown")
    return exercise_numbers("\n\n".join(sources))


def check_match(exercises: list[int], solutions: dict[int, Solution], where: str) -> None:
    """SolutionError unless every exercise has one solution and every solution an exercise."""
    problems = []
    missing = [n for n in exercises if n not in solutions]
    extra = sorted(set(solutions) - set(exercises))
    repeated = sorted({n for n in exercises if exercises.count(n) > 1})
    if missing:
        problems.append(f"exercise(s) {missing} have no solution (def exercise_N in the solutions file)")
    if extra:
        problems.append(f"solution(s) {extra} have no exercise")
    if repeated:
        problems.append(f"exercise number(s) {repeated} appear more than once")
    if problems:
        raise SolutionError(f"{where}: " + "; ".join(problems))


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def solution_block(solution: Solution, source: str, indent: str = "") -> str:
    """The folded ``<details>`` block of one solution, in Markdown."""
    fence = _fence(solution.code)
    text = (
        "<details><summary>Solution</summary>\n\n"
        f"{solution.text}\n\n"
        f"{fence}python\n{solution.code}\n{fence}\n\n"
        f"Run it: `python {source} {solution.number}`\n\n"
        "</details>"
    )
    return "\n".join(indent + line if line else "" for line in text.splitlines())


def fold_solutions(markdown: str, solutions: dict[int, Solution], where: str, source: str) -> str:
    """``markdown`` with each solution folded in after its exercise.

    ``where`` names the chapter in errors; ``source`` is the solutions file
    as the reader runs it (``solutions/03_weakref_outputs.py``).
    """
    items = _exercise_items(markdown)
    check_match([number for number, _, _ in items], solutions, where)
    lines = markdown.splitlines()
    for number, start, end in reversed(items):
        indent = " " * len(_ITEM.match(lines[start]).group(0))
        block = solution_block(solutions[number], source, indent)
        # Blank lines around it: an HTML block ends only at a blank line.
        lines[end:end] = ["", *block.splitlines(), ""]
    return "\n".join(lines) + ("\n" if markdown.endswith("\n") else "")


# ------------------------------------------------------------- the command line


def run(namespace: dict, argv: list[str] | None = None) -> int:
    """Run the solutions that a solutions file defines (``namespace`` is its
    ``globals()``): those numbered in ``argv``, or all of them."""
    argv = sys.argv[1:] if argv is None else argv
    name = Path(namespace.get("__file__", "solutions")).name
    available = sorted(int(_FUNCTION.match(k).group(1)) for k in namespace if _FUNCTION.match(k))
    try:
        wanted = [int(a) for a in argv] or available
    except ValueError:
        print(f"usage: python solutions/{name} [EXERCISE ...]  (exercises: {available})", file=sys.stderr)
        return 2
    unknown = [n for n in wanted if n not in available]
    if unknown:
        print(f"{name}: no solution of exercise {unknown}; the solutions are {available}", file=sys.stderr)
        return 2
    for number in wanted:
        function = namespace[f"exercise_{number}"]
        print(f"== {name}, exercise {number}")
        print(" ".join(function.__doc__.split()))
        print()
        started = time.perf_counter()
        function()
        print(f"(exercise {number}: its checks passed in {time.perf_counter() - started:.1f} s)\n")
    return 0
