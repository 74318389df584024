"""How long a newcomer's two commands take: `make book`, then `make test`, in a fresh clone.

Prints figures; it is not a test (timings depend on the machine and its load). Run from
the repository (it clones the committed HEAD into a scratch folder; pip's cache is used
as it is):

    python3 benchmarks/setup_times.py            # on an idle machine
    python3 benchmarks/setup_times.py --busy     # beside a second `make test`, in a clone of its own

It prints the machine, the date and the versions first, then for each command its wall
time, and the size of `.venv` after it (`du`'s MiB), then the same for `make test` on a
clean clone without `make book` (as CI runs it) and for `make test-quick`.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from dezero_mini.machine import describe  # noqa: E402


def clone(into: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", "--local", str(ROOT), str(into)], check=True)
    return into


def timed(folder: Path, target: str) -> float:
    """Seconds that `make TARGET` took in ``folder`` (its output goes to a log beside it)."""
    log = folder.parent / f"{folder.name}-{target}.log"
    started = time.monotonic()
    with open(log, "w") as out:
        done = subprocess.run(["make", target], cwd=folder, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"setup_times: make {target} failed in {folder} (exit {done.returncode}); see {log}")
    return seconds


def venv_mib(folder: Path) -> int:
    return int(subprocess.run(["du", "-sm", str(folder / ".venv")], capture_output=True, text=True,
                              check=True).stdout.split()[0])


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", action="store_true",
                        help="run a second `make test` in another clone at the same time")
    args = parser.parse_args(argv)
    print(describe(packages=()))
    with tempfile.TemporaryDirectory(prefix="dezero-mini-setup-") as scratch:
        scratch = Path(scratch)
        neighbour = None
        if args.busy:
            other = clone(scratch / "neighbour")
            neighbour = subprocess.Popen(["sh", "-c", "while make test >/dev/null 2>&1; do :; done"],
                                         cwd=other, start_new_session=True)
        try:
            fresh = clone(scratch / "fresh")
            for target in ("book", "test"):
                seconds = timed(fresh, target)
                print(f"make {target}: {minutes(seconds)}; .venv {venv_mib(fresh)} MiB", flush=True)
            ci = clone(scratch / "ci")
            print(f"make test on a clean clone (as CI): {minutes(timed(ci, 'test'))}", flush=True)
            print(f"make test-quick: {minutes(timed(ci, 'test-quick'))}", flush=True)
        finally:
            if neighbour is not None:
                os.killpg(neighbour.pid, signal.SIGTERM)
                neighbour.wait()
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
