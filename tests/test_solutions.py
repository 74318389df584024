"""The worked solutions: one for every exercise of every lesson, and each one runs.

Every lesson ``notebooks/NN_<name>.ipynb`` whose Markdown has "## Exercises"
has ``solutions/NN_<name>.py`` with one ``exercise_N`` per numbered exercise
(solutions/catalog.py). Each solution asserts what its exercise says you
should see, so running it is its test: it runs here in a subprocess of its
own, as a learner runs it (``python solutions/NN_<name>.py N``), so that
solutions that measure memory start from a clean interpreter. A change to the
framework that breaks a solution fails here.
"""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "solutions"))
import catalog  # noqa: E402  (solutions/catalog.py)

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SOLUTION_FILES = sorted((ROOT / "solutions").glob(catalog.SOLUTION_GLOB))
SOLUTION_TIMEOUT = 300  # seconds for one solution; they take seconds (printed)


def _solution_params():
    params = []
    for path in SOLUTION_FILES:
        for number in sorted(catalog.read_solutions(path)):
            params.append(pytest.param(path, number, id=f"{path.stem[:2]}-exercise-{number}"))
    return params or [pytest.param(None, None, id="no-solutions",
                                   marks=pytest.mark.skip(reason="solutions/ has no solutions yet"))]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_exercise_has_exactly_one_solution(path):
    exercises = catalog.lesson_exercises(path)
    assert exercises == list(range(1, len(exercises) + 1)), (
        f"{path.name}: the exercises are numbered {exercises}; number them 1, 2, 3, ..."
    )
    solutions_path = catalog.solutions_file(ROOT, path.stem)
    if not exercises:
        assert not solutions_path.exists(), f"{solutions_path.name} has solutions, but {path.name} no exercises"
        return
    assert solutions_path.is_file(), (
        f"{path.name} has exercises {exercises}, but there is no solutions/{path.stem}.py "
        "with a function exercise_N for each (see solutions/catalog.py)"
    )
    catalog.check_match(exercises, catalog.read_solutions(solutions_path), path.name)


def test_every_solutions_file_has_its_lesson():
    lessons = {p.stem for p in NOTEBOOKS}
    orphans = [p.name for p in SOLUTION_FILES if p.stem not in lessons]
    assert not orphans, f"solutions files without a lesson notebook of the same name: {orphans}"


@pytest.mark.parametrize("path, number", _solution_params())
def test_solution_runs_and_its_checks_pass(path, number, progress_line):
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONHASHSEED="0")
    start = time.perf_counter()
    result = subprocess.run([sys.executable, str(path), str(number)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=SOLUTION_TIMEOUT)
    seconds = time.perf_counter() - start
    progress_line(f"{path.name} exercise {number} ran in {seconds:.1f} s")
    assert result.returncode == 0, (
        f"python solutions/{path.name} {number} failed (exit status {result.returncode}):\n"
        f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    assert f"exercise {number}: its checks passed" in result.stdout


# ------------------------------------------------------- the catalog itself

LESSON = """# A lesson

## Exercises

1. **First.** Do this.
   *What you should see:* that.
2. **Second.** Do that,

   over two paragraphs.

## Further reading

* A book.
"""

SOLUTIONS = '''
def exercise_1():
    """It shows
    the first thing."""
    # a comment that belongs to the code
    x = 1
    assert x == 1


def exercise_2():
    """The second."""
    assert True


def helper():
    pass
'''


def test_read_solutions_and_fold_them(tmp_path):
    path = tmp_path / "01_lesson.py"
    path.write_text(SOLUTIONS)
    solutions = catalog.read_solutions(path)
    assert sorted(solutions) == [1, 2]
    assert solutions[1].text == "It shows the first thing."
    assert solutions[1].code == "# a comment that belongs to the code\nx = 1\nassert x == 1"

    folded = catalog.fold_solutions(LESSON, solutions, "01_lesson.md", "solutions/01_lesson.py")
    lines = folded.splitlines()
    # Each block is inside its item (indented like the item's text), after all of it.
    first = lines.index("   <details><summary>Solution</summary>")
    assert lines[first - 2] == "   *What you should see:* that." and lines[first - 1] == ""
    assert lines[first + 2] == "   It shows the first thing."
    assert "   Run it: `python solutions/01_lesson.py 1`" in lines
    second = lines.index("   <details><summary>Solution</summary>", first + 1)
    assert lines[second - 2] == "   over two paragraphs."
    assert lines.index("2. **Second.** Do that,") > lines.index("   </details>")
    # A blank line after each block: an HTML block ends only there.
    for k, line in enumerate(lines):
        if line.strip() == "</details>":
            assert lines[k + 1] == ""
    assert folded.count("<details>") == 2
    assert folded.index("## Further reading") > second


def test_an_exercise_without_a_solution_or_a_solution_without_an_exercise_is_an_error(tmp_path):
    path = tmp_path / "01_lesson.py"
    path.write_text(SOLUTIONS)
    solutions = catalog.read_solutions(path)
    with pytest.raises(catalog.SolutionError, match=r"exercise\(s\) \[2\] have no solution"):
        catalog.fold_solutions(LESSON, {1: solutions[1]}, "01_lesson.md", "x.py")
    with pytest.raises(catalog.SolutionError, match=r"solution\(s\) \[3\] have no exercise"):
        catalog.fold_solutions(LESSON, {**solutions, 3: solutions[1]}, "01_lesson.md", "x.py")
    path.write_text('def exercise_1():\n    x = 1\n')
    with pytest.raises(catalog.SolutionError, match="no docstring"):
        catalog.read_solutions(path)


def test_numbered_lines_in_code_or_other_sections_are_not_exercises():
    markdown = ("## Summary\n\n1. not an exercise\n\n## Exercises\n\n1. One.\n\n"
                "```text\n2. inside a code block\n```\n\n2. Two.\n\n## Further reading\n\n3. no\n")
    assert catalog.exercise_numbers(markdown) == [1, 2]
    assert catalog.exercise_numbers("# No exercises\n\n1. a list\n") == []


def test_the_command_line_runs_one_solution_or_all(tmp_path):
    path = tmp_path / "01_lesson.py"
    path.write_text(SOLUTIONS + "\nif __name__ == '__main__':\n    import sys\n"
                    "    from catalog import run\n    sys.exit(run(globals()))\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "solutions"))
    one = subprocess.run([sys.executable, str(path), "2"], capture_output=True, text=True, env=env)
    assert one.returncode == 0 and "exercise 2" in one.stdout and "exercise 1" not in one.stdout
    both = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env)
    assert both.returncode == 0 and "It shows the first thing." in both.stdout
    assert "exercise 2: its checks passed" in both.stdout
    unknown = subprocess.run([sys.executable, str(path), "7"], capture_output=True, text=True, env=env)
    assert unknown.returncode == 2 and "no solution of exercise [7]" in unknown.stderr
