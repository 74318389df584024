"""Run the notebook and contract tests on every supported Python this machine has.

    python tools/test_pythons.py                 (what `make test-pythons` runs)
    python tools/test_pythons.py --setup-only    only make the environments
    python tools/test_pythons.py -- -k stage01   options after -- go to pytest

The supported range starts at the version in pyproject.toml's
``requires-python`` (the one place that states it) and goes up to the newest
``3.x`` found. A Python is found on PATH (``python3.12``) or in pyenv's
versions folder (``$PYENV_ROOT/versions/3.12.*``, newest patch release). Each
gets its own virtual environment, ``.venvs/py3.X`` (git-ignored), with
dezero_mini installed in editable mode with its test extra; pip runs again
only when pyproject.toml is newer than the environment. The tests of every
Python run one after the other (they measure memory and time: running them
side by side would only make each slower), then a table says how each went.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENVS = ROOT / ".venvs"
DEFAULT_TESTS = ["tests/test_notebooks.py", "tests/test_stage_memory.py"]
NEWEST_MINOR_TRIED = 30  # 3.30: far beyond any release; only what exists is used


def minimum_python(pyproject: Path = ROOT / "pyproject.toml") -> tuple[int, int]:
    """The lowest supported version, from ``requires-python = ">=3.N"``."""
    match = re.search(r'^requires-python\s*=\s*">=\s*(\d+)\.(\d+)', pyproject.read_text(), re.MULTILINE)
    if not match:
        raise SystemExit(f"{pyproject}: no requires-python of the form \">=3.N\"")
    return int(match.group(1)), int(match.group(2))


def _version_of(python: str) -> str | None:
    """``3.12.1`` for a working interpreter, None when it does not run."""
    try:
        out = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _pyenv_candidates(minor: int) -> list[str]:
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = []
    for folder in root.glob(f"3.{minor}.*"):
        patch = folder.name.split(".")[2]
        if patch.isdigit() and (folder / "bin" / "python3").is_file():
            found.append((int(patch), str(folder / "bin" / "python3")))
    return [path for _, path in sorted(found, reverse=True)]


def find_pythons(minimum: tuple[int, int]) -> dict[str, tuple[str, str]]:
    """``{"3.12": (path, "3.12.1"), ...}``: one working interpreter per minor version."""
    found = {}
    for minor in range(minimum[1], NEWEST_MINOR_TRIED + 1):
        on_path = shutil.which(f"python3.{minor}")
        for candidate in [*_pyenv_candidates(minor), *([on_path] if on_path else [])]:
            version = _version_of(candidate)
            if version and version.startswith(f"3.{minor}."):
                found[f"3.{minor}"] = (candidate, version)
                break
    return found


def ensure_venv(minor: str, python: str) -> Path:
    """``.venvs/py3.X/bin/python``, created and installed when needed."""
    venv = VENVS / f"py{minor}"
    vpy = venv / "bin" / "python"
    stamp = venv / ".installed-from-pyproject"
    if not vpy.is_file():
        shutil.rmtree(venv, ignore_errors=True)
        print(f"[{minor}] creating {venv.relative_to(ROOT)} with {python}", flush=True)
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    if not stamp.is_file() or stamp.stat().st_mtime < (ROOT / "pyproject.toml").stat().st_mtime:
        print(f"[{minor}] installing dezero_mini[test] (editable)", flush=True)
        pip = [str(vpy), "-m", "pip", "--disable-pip-version-check", "--quiet"]
        subprocess.run([*pip, "install", "--upgrade", "pip"], check=True, cwd=ROOT)
        subprocess.run([*pip, "install", "--editable", ".[test]"], check=True, cwd=ROOT)
        stamp.touch()
    return vpy


_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")


def run_tests(minor: str, vpy: Path, tests: list[str], pytest_args: list[str]) -> dict:
    """Run pytest with ``vpy``; return its counts, seconds and exit status."""
    print(f"[{minor}] pytest {' '.join(tests + pytest_args)}", flush=True)
    start = time.perf_counter()
    proc = subprocess.run([str(vpy), "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests, *pytest_args],
                          cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    log = VENVS / f"py{minor}.log"
    log.write_text(proc.stdout + proc.stderr)
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
              for n, kind in _COUNT.findall(summary)}
    print(f"[{minor}] {summary or 'no pytest summary'} (log: {log.relative_to(ROOT)})", flush=True)
    return {"counts": counts, "seconds": seconds, "status": proc.returncode}


def table(rows: list[tuple[str, str, dict | None, str]]) -> str:
    header = ["Python", "passed", "failed", "errors", "skipped", "minutes", "result"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for minor, version, result, note in rows:
        if result is None:
            lines.append(f"| {version} | | | | | | {note} |")
            continue
        c = result["counts"]
        lines.append(f"| {version} | {c.get('passed', 0)} | {c.get('failed', 0)} | {c.get('error', 0)} | "
                     f"{c.get('skipped', 0)} | {result['seconds'] / 60:.1f} | "
                     f"{'ok' if result['status'] == 0 else 'FAILED'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setup-only", action="store_true", help="make the environments, run no test")
    parser.add_argument("--tests", nargs="+", default=DEFAULT_TESTS,
                        help="test files to run (default: %(default)s)")
    args = parser.parse_args(argv)

    minimum = minimum_python()
    pythons = find_pythons(minimum)
    if not pythons:
        print(f"No Python {minimum[0]}.{minimum[1]} or newer found (PATH, pyenv).", file=sys.stderr)
        return 1
    print(f"Supported: Python {minimum[0]}.{minimum[1]} and newer (pyproject.toml). Found: "
          + ", ".join(version for _, version in pythons.values()), flush=True)
    VENVS.mkdir(exist_ok=True)
    rows = []
    for minor, (python, version) in pythons.items():
        try:
            vpy = ensure_venv(minor, python)
        except subprocess.CalledProcessError as exc:
            rows.append((minor, version, None, f"could not set up: {exc}"))
            continue
        if args.setup_only:
            rows.append((minor, version, None, f"ready: {vpy.relative_to(ROOT)}"))
            continue
        rows.append((minor, version, run_tests(minor, vpy, args.tests, pytest_args), ""))
    print()
    print(table(rows))
    bad = [r for r in rows if (r[2] is None and not args.setup_only) or (r[2] and r[2]["status"] != 0)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
