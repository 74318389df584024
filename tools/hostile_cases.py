"""The cases of tools/hostile_sweep.py.

API_CASES: (name, code, expect, words): the code runs with np, dz, F, L, M,
datasets, models, optimizers, utils, DataLoader, SeqDataLoader and want()
(a check of the value: False is a silent wrong result); expect is "error"
(a clear error is due: one line naming one of the comma-separated words),
"ok" or "either" (a clear error or a right value).

CLI_CASES: dicts with name, argv (after ``python -m dezero_mini``), expect,
and optionally setup (functions of the work folder), env, entry="script",
shell (a bash line around {cmd}), signal and after (seconds), stdin,
timeout, check (a function of the folder and the result: a message when a
file it must not touch was touched).

About 15 of the command lines repeat a case of tests/ (train --epochs 0,
--hidden 0, --seed -1, --lr 1e400; memory --batches 0; check --timeout 0
and -1, --total-timeout inf; start 0; grade --jobs 0); the rest are new.
"""
import os
import signal
from pathlib import Path

STEP02 = str(Path(__file__).resolve().parents[1] / "steps" / "step02_cycles.py")


def file(name, data):
    def make(work):
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return make


def folder(name):
    return lambda work: (work / name).mkdir(parents=True, exist_ok=True)


def link(name, target):
    return lambda work: os.symlink(target, work / name)


def unreadable(name, data="x = 1\n"):
    def make(work):
        (work / name).write_text(data)
        os.chmod(work / name, 0)
    return make


def copy_step(name, stage_file=STEP02):
    return file(name, Path(stage_file).read_text())


def unchanged(name, data):
    def check(work, done):
        path = work / name
        if not path.exists() or path.read_bytes() != data:
            return f"{name} was changed"
    return check


def no_file(name):
    return lambda work, done: f"{name} was written" if (work / name).exists() else None


#: A small tmpfs, mounted by whoever runs the sweep as root
#: (mount -t tmpfs -o size=64k tmpfs /tmp/dezero_mini_full); the cases that
#: write there fill it first. Without it they are left out.
FULL = os.environ.get("DEZERO_MINI_SWEEP_FULL", "/tmp/dezero_mini_full")


def fill(work):
    """Fill the tmpfs at FULL (a file as large as it takes), after emptying
    it: only a mounted file system of at most 1 MiB, never a folder of files."""
    stats = os.statvfs(FULL)
    if not os.path.ismount(FULL) or stats.f_blocks * stats.f_frsize > 1024 * 1024:
        raise SystemExit(f"{FULL} is not a small tmpfs of its own; not emptying it")
    for name in os.listdir(FULL):
        os.unlink(os.path.join(FULL, name))
    filler = os.open(os.path.join(FULL, "filler"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        while os.write(filler, b"\0" * 4096):
            pass
    except OSError:  # no space left: full
        pass
    finally:
        os.close(filler)


def no_file_in_full(work, done):
    left = [name for name in os.listdir(FULL) if name != "filler"]
    return f"left {left} on the full disk" if left else None


C = []


def case(name, argv, expect="error", **kw):
    C.append({"name": name, "argv": argv, "expect": expect, **kw})


# --- train
case("train --epochs 0", ["train", "--epochs", "0", "--dataset", "spiral"])
case("train --epochs -1", ["train", "--epochs", "-1", "--dataset", "spiral"])
case("train --epochs 1e3", ["train", "--epochs", "1e3", "--dataset", "spiral"])
case("train --epochs huge, then Ctrl-C", ["train", "--epochs", "99999999999999999999", "--dataset", "spiral"],
     shell="timeout -s INT 25 {cmd}")
case("train --batch-size 0", ["train", "--batch-size", "0", "--dataset", "spiral"])
case("train --batch-size 10**9", ["train", "--batch-size", "1000000000", "--dataset", "spiral", "--epochs", "1"], expect="either")
case("train --hidden empty", ["train", "--hidden", "", "--dataset", "spiral"])
case("train --hidden ,,", ["train", "--hidden", ",,", "--dataset", "spiral"])
case("train --hidden 0", ["train", "--hidden", "0", "--dataset", "spiral"])
case("train --hidden -5", ["train", "--hidden=-5", "--dataset", "spiral"])
case("train --hidden 10**7", ["train", "--hidden", "10000000,10000000", "--dataset", "spiral"])
case("train --hidden abc", ["train", "--hidden", "abc", "--dataset", "spiral"])
case("train --lr 0", ["train", "--lr", "0", "--dataset", "spiral"], expect="either")
case("train --lr -1", ["train", "--lr", "-1", "--dataset", "spiral"])
case("train --lr inf", ["train", "--lr", "inf", "--dataset", "spiral"])
case("train --lr 1e400", ["train", "--lr", "1e400", "--dataset", "spiral"])
case("train --lr 0x10", ["train", "--lr", "0x10", "--dataset", "spiral"])
case("train --seed -1", ["train", "--seed", "-1", "--dataset", "spiral"])
case("train --seed 2**40", ["train", "--seed", str(2**40), "--dataset", "spiral", "--epochs", "1"], expect="either")
case("train --dataset MNIST caps", ["train", "--dataset", "MNIST"])
case("train mnist no data-dir", ["train", "--dataset", "mnist", "--data-dir", "/nonexistent"])
case("train mnist data-dir file", ["train", "--dataset", "mnist", "--data-dir", "f.txt"], setup=[file("f.txt", "x")])
case("train mnist data-dir empty dir", ["train", "--dataset", "mnist", "--data-dir", "d"], setup=[folder("d")])
case("train mnist data-dir garbage idx", ["train", "--dataset", "mnist", "--data-dir", "d"],
     setup=[file("d/train-images-idx3-ubyte.gz", b"\x1f\x8b garbage"), file("d/train-labels-idx1-ubyte.gz", b"")])
case("train --data-dir with spiral", ["train", "--dataset", "spiral", "--data-dir", "/nonexistent", "--epochs", "1"], expect="either")
case("train --save to dir", ["train", "--dataset", "spiral", "--epochs", "1", "--save", "d/"], setup=[folder("d")])
case("train --save no .npz", ["train", "--dataset", "spiral", "--epochs", "1", "--save", "w.txt"], expect="either")
case("train --save in missing dir", ["train", "--dataset", "spiral", "--epochs", "1", "--save", "no/such/w.npz"])
case("train --save over a link", ["train", "--dataset", "spiral", "--epochs", "1", "--save", "w.npz"],
     setup=[file("real.npz", b"keep"), link("w.npz", "real.npz")], expect="either")
case("train --save unwritable dir", ["train", "--dataset", "spiral", "--epochs", "1", "--save", "/proc/w.npz"])
case("train --activation RELU", ["train", "--activation", "RELU"])
case("train --optimizer none", ["train", "--optimizer", "none"])
case("train sincurve ok", ["train", "--dataset", "sincurve", "--epochs", "1"], expect="ok", timeout=300)
case("train stdout closed", ["train", "--dataset", "spiral", "--epochs", "1"], shell="{cmd} >&-")
case("train stdout /dev/full", ["train", "--dataset", "spiral", "--epochs", "1"], shell="{cmd} > /dev/full")
case("train | head -1", ["train", "--dataset", "spiral", "--epochs", "3"], shell="{cmd} | head -1", expect="ok")
case("train SIGINT early", ["train", "--dataset", "spiral"], signal=signal.SIGINT, after=0.3)
case("train SIGTERM", ["train", "--dataset", "spiral", "--epochs", "50"], signal=signal.SIGTERM, after=2.5)
case("train SIGHUP", ["train", "--dataset", "spiral", "--epochs", "50"], signal=signal.SIGHUP, after=2.5, expect="either")
case("train env MPLBACKEND bogus", ["train", "--dataset", "spiral", "--epochs", "1"], env={"MPLBACKEND": "nonesuch"}, expect="either")
case("train env DEZERO_MINI_DATA file", ["train", "--dataset", "mnist"], env={"DEZERO_MINI_DATA": "/etc/passwd"})
case("train env HOME missing", ["train", "--dataset", "spiral", "--epochs", "1"], env={"HOME": "/nonexistent"}, expect="ok")
case("train env LANG C", ["train", "--dataset", "spiral", "--epochs", "1"], env={"LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": "ascii"}, expect="ok")
case("train env COLUMNS junk", ["train", "--dataset", "spiral", "--epochs", "1"], env={"COLUMNS": "-5", "LINES": "abc"}, expect="ok")
case("train env OMP_NUM_THREADS junk", ["train", "--dataset", "spiral", "--epochs", "1"], env={"OMP_NUM_THREADS": "many"}, expect="ok")
case("train unknown option", ["train", "--epochz", "1"], expect="error")
case("train positional junk", ["train", "spiral"])
# --- memory
case("memory --stage 0", ["memory", "--stage", "0"])
case("memory --stage 11", ["memory", "--stage", "11"])
case("memory --stage ,", ["memory", "--stage", ","])
case("memory --stage 1,1", ["memory", "--stage", "1,1", "--batches", "2"], expect="either")
case("memory --stage name typo", ["memory", "--stage", "weakref_output"])
case("memory --stage unicode", ["memory", "--stage", "①"])
case("memory --batches 0", ["memory", "--stage", "1", "--batches", "0"])
case("memory --batches -3", ["memory", "--stage", "1", "--batches=-3"])
case("memory --batches 1e9", ["memory", "--stage", "1", "--batches", "1000000000"])
case("memory --out .txt", ["memory", "--stage", "1", "--batches", "2", "--out", "m.txt"])
case("memory --out dir", ["memory", "--stage", "1", "--batches", "2", "--out", "d"], setup=[folder("d")])
case("memory --out = --csv", ["memory", "--stage", "1", "--batches", "2", "--out", "x.png", "--csv", "x.png"])
case("memory --csv over step file", ["memory", "--stage", "1", "--batches", "2", "--csv", "step.py"],
     setup=[file("step.py", "x = 1\n")], check=unchanged("step.py", b"x = 1\n"), expect="either")
case("memory --out in missing dir", ["memory", "--stage", "1", "--batches", "2", "--out", "no/m.png"])
case("memory --out on a full disk", ["memory", "--stage", "1", "--batches", "2", "--out", f"{FULL}/m.png"], setup=[fill], check=no_file_in_full)
case("memory stdout closed", ["memory", "--stage", "1", "--batches", "2"], shell="{cmd} >&-")
case("memory ok", ["memory", "--stage", "1", "--batches", "3"], expect="ok", timeout=300)
# --- graph
case("graph --stage 99", ["graph", "--stage", "99"])
case("graph --stage empty", ["graph", "--stage", ""])
case("graph --out .jpg2", ["graph", "--out", "g.jpg2"])
case("graph --out no ext", ["graph", "--out", "graph"])
case("graph --out dir", ["graph", "--out", "d.svg"], setup=[folder("d.svg")])
case("graph --out over link to input", ["graph", "--out", "g.svg"], setup=[file("in.py", "x"), link("g.svg", "in.py")], expect="either", check=unchanged("in.py", b"x"))
case("graph --dot --out", ["graph", "--dot", "--out", "g.svg"], expect="either")
case("graph --dot | head -c 10", ["graph", "--dot"], shell="{cmd} | head -c 10", expect="ok")
case("graph --dot 2>&-", ["graph", "--dot"], shell="{cmd} 2>&-", expect="ok")
case("graph no dot PATH", ["graph", "--out", "g.svg"], env={"PATH": "/nonexistent"})
case("graph --after-del --dot", ["graph", "--after-del", "--dot"], expect="ok")
case("graph stdin closed", ["graph", "--dot"], shell="{cmd} <&-", expect="ok")
# --- leaks
case("leaks missing file", ["leaks", "nope.py"])
case("leaks empty file", ["leaks", "e.py"], setup=[file("e.py", "")], expect="either")
case("leaks binary file", ["leaks", "b.py"], setup=[file("b.py", bytes(range(256)))])
case("leaks non-utf8", ["leaks", "n.py"], setup=[file("n.py", b"x = '\xff\xfe'\n")])
case("leaks directory", ["leaks", "d"], setup=[folder("d")])
case("leaks unreadable", ["leaks", "u.py"], setup=[unreadable("u.py")], expect="either")
case("leaks syntax error", ["leaks", "s.py"], setup=[file("s.py", "def (:\n")])
case("leaks script raises", ["leaks", "r.py"], setup=[file("r.py", "raise ValueError('boom')\n")], own_traceback=True)
case("leaks script sys.exit(3)", ["leaks", "x.py"], setup=[file("x.py", "import sys; sys.exit(3)\n")], expect="either")
case("leaks script KeyboardInterrupt", ["leaks", "k.py"], setup=[file("k.py", "raise KeyboardInterrupt\n")])
case("leaks --consecutive 0", ["leaks", "--consecutive", "0", "e.py"], setup=[file("e.py", "")])
case("leaks --consecutive -2", ["leaks", "--consecutive=-2", "e.py"], setup=[file("e.py", "")])
case("leaks --steps 0", ["leaks", "--steps", "0", "e.py"], setup=[file("e.py", "")])
case("leaks --framework bogus", ["leaks", "--framework", "jax", "e.py"], setup=[file("e.py", "")])
case("leaks --plot over script", ["leaks", "--plot", "e.py", "e.py"], setup=[file("e.py", "")], check=unchanged("e.py", b""))
case("leaks huge file", ["leaks", "h.py"], setup=[file("h.py", "#" * (20 * 1024 * 1024))], expect="either", timeout=200)
case("leaks link to /dev/zero", ["leaks", "z.py"], setup=[link("z.py", "/dev/zero")], timeout=60)
case("leaks fifo", ["leaks", "f.py"], setup=[lambda w: os.mkfifo(w / "f.py")], timeout=60)
case("leaks script args", ["leaks", "a.py", "--", "--epochs", "1"], setup=[file("a.py", "import sys; print(sys.argv)\n")], expect="either")
# --- start
case("start 0", ["start", "0"])
case("start 11", ["start", "11"])
case("start -1", ["start", "-1"])
case("start abc", ["start", "abc"])
case("start 3 into file", ["start", "3", "f"], setup=[file("f", "x")], check=unchanged("f", b"x"))
case("start 3 into missing dir", ["start", "3", "no/such"])
case("start 3 into /proc", ["start", "3", "/proc"])
case("start 3 dir is link to file", ["start", "3", "l"], setup=[file("f", "x"), link("l", "f")])
case("start 3 name exists as dir", ["start", "3"], setup=[folder("step03_weakref_outputs.py")])
case("start 3 name is dangling link", ["start", "3"], setup=[link("step03_weakref_outputs.py", "/nonexistent/x")])
case("start 3 stdout closed", ["start", "3"], shell="{cmd} >&-", check=no_file("step03_weakref_outputs.py"), expect="error")
case("start 3 | head -c1", ["start", "3"], shell="{cmd} | head -c1", expect="ok")
case("start 3 non-ascii dir", ["start", "3", "ü dir"], setup=[folder("ü dir")], expect="ok")
case("start 3 dir with newline", ["start", "3", "a\nb"], setup=[folder("a\nb")], expect="ok")
case("start 3 LANG=C non-ascii dir", ["start", "3", "ü"], setup=[folder("ü")], env={"LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": "ascii"}, expect="ok")
case("start 3 twice", ["start", "3"], shell="{cmd} && {cmd}")
# --- check
case("check no file", ["check", "3", "nope.py"])
case("check empty file", ["check", "3", "e.py"], setup=[file("e.py", "")])
case("check binary", ["check", "3", "b.py"], setup=[file("b.py", bytes(range(256)) * 4)])
case("check non-utf8", ["check", "3", "n.py"], setup=[file("n.py", b"# \xff\xfe\nx = 1\n")])
case("check BOM", ["check", "2", "s.py"], setup=[file("s.py", b"\xef\xbb\xbf" + Path(STEP02).read_bytes())], expect="ok", timeout=300)
case("check CRLF", ["check", "2", "s.py"], setup=[file("s.py", Path(STEP02).read_bytes().replace(b"\n", b"\r\n"))], expect="ok", timeout=300)
case("check directory", ["check", "3", "d"], setup=[folder("d")])
case("check unreadable", ["check", "3", "u.py"], setup=[unreadable("u.py")], expect="either")
case("check link to /dev/zero", ["check", "3", "z.py"], setup=[link("z.py", "/dev/zero")], timeout=60)
case("check fifo", ["check", "3", "f.py"], setup=[lambda w: os.mkfifo(w / "f.py")], timeout=60)
case("check stage 0", ["check", "0", "e.py"], setup=[file("e.py", "")])
case("check stage 1.5", ["check", "1.5", "e.py"], setup=[file("e.py", "")])
case("check --timeout 0", ["check", "2", "s.py", "--timeout", "0"], setup=[copy_step("s.py")])
case("check --timeout nan", ["check", "2", "s.py", "--timeout", "nan"], setup=[copy_step("s.py")])
case("check --timeout -1", ["check", "2", "s.py", "--timeout=-1"], setup=[copy_step("s.py")])
case("check --total-timeout inf", ["check", "2", "s.py", "--total-timeout", "inf"], setup=[copy_step("s.py")])
case("check --batches 0", ["check", "2", "s.py", "--batches", "0"], setup=[copy_step("s.py")])
case("check --contract nosuch", ["check", "2", "s.py", "--contract", "nosuch"], setup=[copy_step("s.py")])
case("check --contract empty", ["check", "2", "s.py", "--contract", ""], setup=[copy_step("s.py")])
case("check --weights empty file", ["check", "2", "s.py", "--weights", "w.toml"], setup=[copy_step("s.py"), file("w.toml", "")], expect="either")
case("check --weights negative", ["check", "2", "s.py", "--weights", "w.json"], setup=[copy_step("s.py"), file("w.json", '{"freed_graph": -5}')])
case("check --weights nan", ["check", "2", "s.py", "--weights", "w.json"], setup=[copy_step("s.py"), file("w.json", '{"x": NaN}')])
case("check --weights array", ["check", "2", "s.py", "--weights", "w.json"], setup=[copy_step("s.py"), file("w.json", '[1, 2]')])
case("check --weights binary", ["check", "2", "s.py", "--weights", "w.toml"], setup=[copy_step("s.py"), file("w.toml", bytes(range(256)))])
case("check --weights .yaml", ["check", "2", "s.py", "--weights", "w.yaml"], setup=[copy_step("s.py"), file("w.yaml", "a: 1")])
case("check --gradescope into dir", ["check", "2", "s.py", "--gradescope", "d"], setup=[copy_step("s.py"), folder("d")])
case("check --gradescope = file", ["check", "2", "s.py", "--gradescope", "s.py"], setup=[copy_step("s.py")], check=lambda w, d: None if Path(STEP02).read_text() == (w / "s.py").read_text() else "s.py overwritten")
case("check --json | head -c 5", ["check", "2", "s.py", "--json"], setup=[copy_step("s.py")], shell="{cmd} | head -c 5", expect="either", timeout=300)
case("check --sandbox bogus", ["check", "2", "s.py", "--sandbox", "maybe"], setup=[copy_step("s.py")])
case("check file prints 1MB", ["check", "2", "p.py"], setup=[file("p.py", Path(STEP02).read_text() + "\nprint('x' * 1000000)\n")], expect="either", timeout=300)
case("check file writes stderr junk", ["check", "2", "p.py"], setup=[file("p.py", Path(STEP02).read_text() + "\nimport sys; sys.stderr.write('\\x1b[2J\\x00junk')\n")], expect="either", timeout=300)
case("check file calls os._exit", ["check", "2", "p.py"], setup=[file("p.py", "import os; os._exit(0)\n")])
case("check file sleeps", ["check", "2", "p.py", "--timeout", "2", "--total-timeout", "3"], setup=[file("p.py", "import time; time.sleep(60)\n")], timeout=60)
case("check file recursion", ["check", "2", "p.py"], setup=[file("p.py", "def f(): f()\nf()\n")])
case("check file allocates 8GB", ["check", "2", "p.py"], setup=[file("p.py", "x = bytearray(8 * 1024**3)\n")], timeout=120)
case("check file forks", ["check", "2", "p.py", "--total-timeout", "5"], setup=[file("p.py", "import os\nfor _ in range(5):\n    os.fork()\n")], timeout=60)
case("check SIGINT", ["check", "2", "s.py"], setup=[copy_step("s.py")], signal=signal.SIGINT, after=2.0)
case("check SIGTERM", ["check", "2", "s.py"], setup=[copy_step("s.py")], signal=signal.SIGTERM, after=2.0)
# --- grade
case("grade no submissions", ["grade", "2"])
case("grade --csv same as submission", ["grade", "2", "s.py", "--csv", "s.py"], setup=[copy_step("s.py")], check=lambda w, d: None if Path(STEP02).read_text() == (w / "s.py").read_text() else "s.py overwritten")
case("grade --jobs 0", ["grade", "2", "s.py", "--jobs", "0"], setup=[copy_step("s.py")])
case("grade --jobs 10000", ["grade", "2", "s.py", "--jobs", "10000"], setup=[copy_step("s.py")], expect="either", timeout=300)
case("grade --jobs -1", ["grade", "2", "s.py", "--jobs=-1"], setup=[copy_step("s.py")])
case("grade dup submission", ["grade", "2", "s.py", "s.py", "--csv", "g.csv"], setup=[copy_step("s.py")], expect="either", timeout=300)
case("grade a dir", ["grade", "2", "d", "--csv", "g.csv"], setup=[folder("d")], expect="either")
case("grade --csv in missing dir", ["grade", "2", "s.py", "--csv", "no/g.csv"], setup=[copy_step("s.py")])
case("grade --csv is dir", ["grade", "2", "s.py", "--csv", "d"], setup=[copy_step("s.py"), folder("d")])
case("grade --engine without container", ["grade", "2", "s.py", "--engine", "docker"], setup=[copy_step("s.py")], expect="either", timeout=300)
case("grade --isolation container no engine", ["grade", "2", "s.py", "--isolation", "container"], setup=[copy_step("s.py")], env={"PATH": "/usr/bin:/bin"})
# --- progress
case("progress missing dir", ["progress", "nope"])
case("progress a file", ["progress", "f"], setup=[file("f", "x")])
case("progress empty dir", ["progress"], expect="ok")
case("progress dir of junk", ["progress"], setup=[file("step02_cycles.py", bytes(range(256)))], expect="either", timeout=300)
case("progress --batches -1", ["progress", "--batches=-1"])
case("progress unreadable dir", ["progress", "u"], setup=[folder("u"), lambda w: os.chmod(w / "u", 0)], expect="either")
# --- a full disk
case("train --save on a full disk", ["train", "--dataset", "spiral", "--epochs", "1", "--save", f"{FULL}/w.npz"], setup=[fill], check=no_file_in_full)
case("start into a full disk", ["start", "3", FULL], setup=[fill], check=no_file_in_full)
case("check --gradescope on a full disk", ["check", "2", "s.py", "--gradescope", f"{FULL}/results.json"], setup=[copy_step("s.py"), fill], check=no_file_in_full, timeout=300)
case("grade --csv on a full disk", ["grade", "2", "s.py", "--csv", f"{FULL}/g.csv"], setup=[copy_step("s.py"), fill], check=no_file_in_full, timeout=300)
case("graph --out on a full disk", ["graph", "--out", f"{FULL}/g.svg"], setup=[fill], check=no_file_in_full)
case("graph --dot > full disk", ["graph", "--dot"], setup=[fill], shell="{cmd} > " + FULL + "/g.dot")
# --- top level
case("no command", [])
case("unknown command", ["trian"])
case("--version extra", ["--version", "x"], expect="either")
case("help of every command | head -1", ["check", "--help"], shell="{cmd} | head -1", expect="ok")
case("argv with NUL-like junk", ["train", "--dataset", "spiral\udcff"], expect="error")
case("cwd removed", ["graph", "--dot"], shell="mkdir gone && cd gone && rmdir ../gone && {cmd}")
case("stdin is a directory", ["graph", "--dot"], shell="{cmd} < .", expect="ok", cpython=True)
case("env PYTHONHASHSEED junk", ["--version"], env={"PYTHONHASHSEED": "abc"}, expect="either", cpython=True)
case("env DEZERO_MINI_DATA relative", ["train", "--dataset", "mnist"], env={"DEZERO_MINI_DATA": "rel/dir"})
case("env TMPDIR missing", ["memory", "--stage", "1", "--batches", "2"], env={"TMPDIR": "/nonexistent"}, expect="either", timeout=300)
case("script entry: learner dezero_mini.py", ["graph", "--dot"], entry="script", setup=[file("dezero_mini.py", "raise SystemExit('learner ran')\n")], expect="ok")
case("-m entry: learner dezero_mini.py", ["graph", "--dot"], setup=[file("dezero_mini.py", "raise SystemExit('learner ran')\n")], expect="error")
case("-m entry: learner dezero_mini.py printing", ["graph", "--dot"], setup=[file("dezero_mini.py", "print('hi')\n")], expect="error")
case("-m entry: learner numpy.py", ["graph", "--dot"], setup=[file("numpy.py", "raise SystemExit('learner ran')\n")], expect="ok")
case("PYTHONPATH=. learner numpy.py", ["graph", "--dot"], env={"PYTHONPATH": "."}, setup=[file("numpy.py", "raise SystemExit('learner ran')\n")], expect="error")
case("PYTHONPATH=. learner tqdm.py", ["--version"], env={"PYTHONPATH": "."}, setup=[file("tqdm.py", "raise SystemExit('learner ran')\n")], expect="either")
case("PYTHONPATH=. learner json.py script", ["graph", "--dot"], entry="script", env={"PYTHONPATH": "."}, setup=[file("json.py", "print('learner ran')\n")], expect="error")

CLI_CASES = C

API_CASES = [
 # --- Variable construction: dtypes and shapes
 ("Variable complex", "x = dz.Variable(np.array([1+2j])); y = F.sum(x * x); y.backward(); want(np.allclose(x.grad.data, [2+4j]))", "either", "Variable"),
 ("Variable object array", "dz.Variable(np.array([object()])) * 2", "error", "Variable,Mul"),
 ("Variable str array", "F.exp(dz.Variable(np.array(['a','b'])))", "error", "Variable,Exp"),
 ("Variable datetime", "F.sum(dz.Variable(np.array(['2020-01-01'], dtype='datetime64[D]')))", "error", "Variable,Sum"),
 ("Variable bytes", "dz.Variable(b'abc')", "error", "Variable"),
 ("Variable dict", "dz.Variable({'a': 1})", "error", "Variable"),
 ("Variable set", "dz.Variable({1, 2})", "error", "Variable"),
 ("Variable name int", "dz.Variable(np.ones(2), name=3)", "either", "Variable,name"),
 ("Variable 0-d nan backward", "x = dz.Variable(np.array(np.nan)); y = x * x; y.backward(); want(np.isnan(x.grad.data))", "ok", ""),
 ("Variable empty backward", "x = dz.Variable(np.ones((0, 3))); y = F.sum(x); y.backward(); want(x.grad.shape == (0, 3))", "ok", ""),
 ("Variable float16 grad dtype", "x = dz.Variable(np.ones(3, np.float16)); y = F.sum(x * x); y.backward(); want(x.grad.data.dtype.kind == 'f')", "ok", ""),
 ("Variable masked array", "dz.Variable(np.ma.masked_array([1.0, 2.0], mask=[0, 1]))", "either", "Variable"),
 ("Variable matrix subclass", "x = dz.Variable(np.asmatrix(np.ones((2, 2)))); y = F.sum(x); y.backward()", "either", "Variable,Sum"),
 ("Variable structured dtype", "dz.Variable(np.zeros(2, dtype=[('a', 'f8')])) + 1", "error", "Variable,Add"),
 ("Variable backward twice retain", "x = dz.Variable(np.array(2.0)); y = x * x; y.backward(retain_grad=True); y.backward()", "either", "backward,retain_graph"),
 ("backward on non-scalar", "x = dz.Variable(np.ones(3)); y = x * 2; y.backward(); want(np.all(x.grad.data == 2))", "ok", ""),
 ("backward create_graph str", "x = dz.Variable(np.ones(3)); y = F.sum(x); y.backward(create_graph='yes')", "either", "backward,create_graph"),
 ("Variable.reshape bad", "dz.Variable(np.ones(6)).reshape(4, 2)", "error", "reshape,Reshape"),
 ("Variable.reshape str", "dz.Variable(np.ones(6)).reshape('a')", "error", "reshape,Reshape"),
 ("Variable.transpose bad axes", "dz.Variable(np.ones((2, 3))).transpose(0, 0)", "error", "transpose,Transpose"),
 ("Variable.sum axis out", "dz.Variable(np.ones((2, 3))).sum(axis=5)", "error", "sum,Sum"),
 ("Variable.sum axis str", "dz.Variable(np.ones((2, 3))).sum(axis='x')", "error", "sum,Sum"),
 ("Variable len 0-d", "len(dz.Variable(np.array(1.0)))", "error", "len,Variable,0-d,unsized"),
 ("Variable bool ambiguous", "bool(dz.Variable(np.ones(3)))", "either", "truth,ambiguous,Variable"),
 ("Variable unhashable?", "hash(dz.Variable(np.ones(3)))", "either", "hash"),
 ("Variable add str", "dz.Variable(np.ones(2)) + 'a'", "error", "add,Add,Variable"),
 ("Variable add None", "dz.Variable(np.ones(2)) + None", "error", "add,Add,Variable"),
 ("Variable mul list ragged", "dz.Variable(np.ones(2)) * [[1], [1, 2]]", "error", "mul,Mul,Variable"),
 ("Variable pow Variable exp", "dz.Variable(np.ones(2)) ** dz.Variable(np.ones(2))", "either", "pow,Pow"),
 ("Variable pow str", "dz.Variable(np.ones(2)) ** 'a'", "error", "pow,Pow"),
 ("Variable shape mismatch add", "dz.Variable(np.ones(3)) + dz.Variable(np.ones(4))", "error", "add,Add"),
 ("Variable matmul mismatch", "F.matmul(dz.Variable(np.ones((2, 3))), dz.Variable(np.ones((2, 3))))", "error", "matmul,MatMul"),
 ("Variable matmul 0-d", "F.matmul(dz.Variable(np.array(1.0)), dz.Variable(np.array(2.0)))", "error", "matmul,MatMul"),
 ("Variable getitem float", "dz.Variable(np.ones(3))[1.5]", "error", "get_item,GetItem,index"),
 ("Variable getitem out", "dz.Variable(np.ones(3))[7]", "error", "get_item,GetItem,index"),
 ("Variable getitem str", "dz.Variable(np.ones(3))['a']", "error", "get_item,GetItem,index"),
 # --- functions with nan/inf/empty/0-d/dtypes
 ("exp inf grad", "x = dz.Variable(np.array([1000.0])); y = F.exp(x); want(np.isinf(y.data[0]))", "ok", ""),
 ("log negative", "y = F.log(dz.Variable(np.array([-1.0]))); want(np.isnan(y.data[0]))", "either", "log,Log"),
 ("log zero", "y = F.log(dz.Variable(np.array([0.0]))); want(np.isneginf(y.data[0]))", "either", "log,Log"),
 ("sigmoid huge", "y = F.sigmoid(dz.Variable(np.array([-1000.0, 1000.0]))); want(np.allclose(y.data, [0, 1]))", "ok", ""),
 ("softmax empty", "F.softmax(dz.Variable(np.ones((0, 3))))", "either", "softmax,Softmax"),
 ("softmax axis out", "F.softmax(dz.Variable(np.ones((2, 3))), axis=4)", "error", "softmax,Softmax,axis"),
 ("softmax 0-d", "F.softmax(dz.Variable(np.array(1.0)))", "error", "softmax,Softmax,axis"),
 ("softmax inf", "y = F.softmax(dz.Variable(np.array([[np.inf, 0.0]]))); want(not np.isnan(y.data).any() or True)", "either", "softmax"),
 ("sce labels float", "F.softmax_cross_entropy(dz.Variable(np.ones((2, 3))), np.array([0.5, 1.0]))", "error", "softmax_cross_entropy,SoftmaxCrossEntropy"),
 ("sce labels out of range", "F.softmax_cross_entropy(dz.Variable(np.ones((2, 3))), np.array([0, 3]))", "error", "softmax_cross_entropy,SoftmaxCrossEntropy"),
 ("sce labels negative", "F.softmax_cross_entropy(dz.Variable(np.ones((2, 3))), np.array([0, -1]))", "error", "softmax_cross_entropy,SoftmaxCrossEntropy"),
 ("sce labels count", "F.softmax_cross_entropy(dz.Variable(np.ones((2, 3))), np.array([0, 1, 2]))", "error", "softmax_cross_entropy,SoftmaxCrossEntropy"),
 ("sce 1-d x", "F.softmax_cross_entropy(dz.Variable(np.ones(3)), np.array([0]))", "error", "softmax_cross_entropy,SoftmaxCrossEntropy"),
 ("sce empty batch", "F.softmax_cross_entropy(dz.Variable(np.ones((0, 3))), np.array([], dtype=int))", "either", "softmax_cross_entropy,SoftmaxCrossEntropy"),
 ("accuracy shape", "F.accuracy(np.ones((2, 3)), np.array([0, 1, 2]))", "error", "accuracy"),
 ("accuracy empty", "F.accuracy(np.ones((0, 3)), np.array([], dtype=int))", "either", "accuracy"),
 ("accuracy labels 2-d", "F.accuracy(np.ones((2, 3)), np.ones((2, 3)))", "error", "accuracy"),
 ("mse shapes", "F.mean_squared_error(dz.Variable(np.ones((3,))), dz.Variable(np.ones((4,))))", "error", "mean_squared_error,MeanSquaredError"),
 ("mse empty", "F.mean_squared_error(dz.Variable(np.ones(0)), dz.Variable(np.ones(0)))", "either", "mean_squared_error,MeanSquaredError"),
 ("dropout ratio 1", "dz.Config.train = True\ntry:\n    y = F.dropout(dz.Variable(np.ones(4)), 1.0)\nfinally:\n    pass\nwant(np.all(np.isfinite(y.data)))", "either", "dropout"),
 ("dropout ratio negative", "F.dropout(dz.Variable(np.ones(4)), -0.5)", "error", "dropout"),
 ("dropout ratio str", "F.dropout(dz.Variable(np.ones(4)), 'a')", "error", "dropout"),
 ("dropout ratio nan", "F.dropout(dz.Variable(np.ones(4)), float('nan'))", "error", "dropout"),
 ("clip min>max", "F.clip(dz.Variable(np.ones(3)), 2.0, 1.0)", "either", "clip,Clip"),
 ("clip nan bound", "F.clip(dz.Variable(np.ones(3)), float('nan'), 1.0)", "error", "clip,Clip"),
 ("max axis out", "F.max(dz.Variable(np.ones((2, 3))), axis=3)", "error", "max,Max,axis"),
 ("max empty", "F.max(dz.Variable(np.ones((0,))))", "error", "max,Max"),
 ("min empty", "F.min(dz.Variable(np.ones((0,))))", "error", "min,Min"),
 ("reshape -1 -1", "F.reshape(dz.Variable(np.ones(6)), (-1, -1))", "error", "reshape,Reshape"),
 ("reshape huge", "F.reshape(dz.Variable(np.ones(6)), (10**12, 10**12))", "error", "reshape,Reshape"),
 ("broadcast_to impossible", "F.broadcast_to(dz.Variable(np.ones(3)), (2, 4))", "error", "broadcast_to,BroadcastTo"),
 ("broadcast_to huge", "F.broadcast_to(dz.Variable(np.ones(1)), (10**7, 10**7))", "either", "broadcast_to,BroadcastTo"),
 ("sum_to bad", "F.sum_to(dz.Variable(np.ones((2, 3))), (4,))", "error", "sum_to,SumTo"),
 ("transpose axes len", "F.transpose(dz.Variable(np.ones((2, 3))), (0,))", "error", "transpose,Transpose"),
 ("linear W 1-d", "F.linear(dz.Variable(np.ones((2, 3))), dz.Variable(np.ones(3)))", "either", "linear,Linear"),
 ("linear b wrong", "F.linear(dz.Variable(np.ones((2, 3))), dz.Variable(np.ones((3, 4))), dz.Variable(np.ones(5)))", "error", "linear,Linear"),
 ("embed_id float ids", "F.embed_id(np.array([0.5]), dz.Variable(np.ones((3, 2))))", "error", "embed_id,EmbedID"),
 ("embed_id too large", "F.embed_id(np.array([3]), dz.Variable(np.ones((3, 2))))", "error", "embed_id,EmbedID"),
 ("get_item bool mask", "y = F.get_item(dz.Variable(np.arange(3.0)), np.array([True, False, True])); y.backward(); want(True)", "either", "get_item"),
 ("get_item list", "y = F.get_item(dz.Variable(np.arange(3.0)), [0, 0]); F.sum(y).backward()", "ok", ""),
 ("conv2d shape", "F.conv2d(dz.Variable(np.ones((1, 3, 4, 4))), dz.Variable(np.ones((2, 2, 3, 3))))", "error", "conv2d,Conv2d"),
 ("conv2d 3-d x", "F.conv2d(dz.Variable(np.ones((3, 4, 4))), dz.Variable(np.ones((2, 3, 3, 3))))", "error", "conv2d,Conv2d"),
 ("conv2d kernel too big", "F.conv2d(dz.Variable(np.ones((1, 1, 2, 2))), dz.Variable(np.ones((1, 1, 5, 5))))", "error", "conv2d,Conv2d"),
 ("conv2d stride 0", "F.conv2d(dz.Variable(np.ones((1, 1, 4, 4))), dz.Variable(np.ones((1, 1, 3, 3))), stride=0)", "error", "conv2d,Conv2d,stride"),
 ("conv2d pad negative", "F.conv2d(dz.Variable(np.ones((1, 1, 4, 4))), dz.Variable(np.ones((1, 1, 3, 3))), pad=-1)", "error", "conv2d,Conv2d,pad"),
 ("pooling kernel 0", "F.pooling(dz.Variable(np.ones((1, 1, 4, 4))), 0)", "error", "pooling,Pooling"),
 ("pooling 2-d x", "F.pooling(dz.Variable(np.ones((4, 4))), 2)", "error", "pooling,Pooling"),
 ("average_pooling stride 0", "F.average_pooling(dz.Variable(np.ones((1, 1, 4, 4))), 2, stride=0)", "error", "average_pooling,AveragePooling,pooling"),
 ("im2col kernel str", "F.im2col(dz.Variable(np.ones((1, 1, 4, 4))), 'a')", "error", "im2col,pair,Im2col"),
 ("batch_norm shapes", "F.batch_norm(dz.Variable(np.ones((2, 3))), np.ones(4), np.ones(4), np.zeros(4), np.ones(4))", "error", "batch_norm,BatchNorm"),
 ("relu int8 overflow", "y = F.relu(dz.Variable(np.array([-128, 127], np.int8))); want(list(y.data) == [0, 127])", "ok", ""),
 ("tanh nan", "y = F.tanh(dz.Variable(np.array([np.nan]))); want(np.isnan(y.data[0]))", "ok", ""),
 ("matmul int64 big", "y = F.matmul(dz.Variable(np.array([[2**62]])), dz.Variable(np.array([[4]]))); y", "either", "matmul,MatMul"),
 ("cat axis out", "F.concat([dz.Variable(np.ones(2)), dz.Variable(np.ones(2))], axis=3) if hasattr(F, 'concat') else (_ for _ in ()).throw(TypeError('concat: absent'))", "error", "concat,Concat"),
 # --- layers
 ("Linear out_size 0", "L.Linear(0)", "error", "Linear,out_size"),
 ("Linear out_size -3", "L.Linear(-3)", "error", "Linear,out_size"),
 ("Linear out_size float", "L.Linear(2.5)", "error", "Linear,out_size"),
 ("Linear out_size str", "L.Linear('10')", "error", "Linear,out_size"),
 ("Linear in_size mismatch", "l = L.Linear(2, in_size=3); l(np.ones((1, 4)))", "error", "Linear,linear"),
 ("Linear dtype str", "L.Linear(2, dtype='not-a-dtype')", "error", "Linear,dtype"),
 ("Linear dtype int", "l = L.Linear(2, dtype=np.int32, in_size=2); l(np.ones((1, 2)))", "either", "Linear,dtype"),
 ("Linear huge", "L.Linear(10**9, in_size=10**9)", "error", "Linear,size,memory"),
 ("Conv2d channels 0", "L.Conv2d(0, 3)", "error", "Conv2d,out_channels"),
 ("Conv2d kernel 0", "L.Conv2d(2, 0)", "error", "Conv2d,kernel"),
 ("RNN hidden 0", "L.RNN(0)", "error", "RNN,hidden"),
 ("LSTM hidden -1", "L.LSTM(-1)", "error", "LSTM,hidden"),
 ("EmbedID in 0", "L.EmbedID(0, 3)", "error", "EmbedID,in_size"),
 ("EmbedID float", "L.EmbedID(2.5, 3)", "error", "EmbedID,in_size"),
 ("BatchNorm 0-d input", "L.BatchNorm()(np.array(1.0))", "error", "BatchNorm,batch_norm"),
 ("Layer setattr param not Parameter", "l = L.Layer(); l.p = np.ones(3); want(list(l.params()) == [])", "ok", ""),
 ("Layer load_weights missing", "L.Linear(2, in_size=2).load_weights('/nonexistent/w.npz')", "error", "load_weights,weights,nonexistent"),
 ("Layer load_weights dir", "L.Linear(2, in_size=2).load_weights('/tmp')", "error", "load_weights,weights,/tmp"),
 ("Layer save_weights dir", "L.Linear(2, in_size=2).save_weights('/tmp/paths_sweep_dir/')", "error", "save_weights,weights,/tmp"),
 ("Layer save_weights None", "L.Linear(2, in_size=2).save_weights(None)", "error", "save_weights,weights,path"),
 # --- models
 ("MLP empty sizes", "models.MLP(())", "error", "MLP,fc_output_sizes"),
 ("MLP zero", "models.MLP((3, 0))", "error", "MLP,Linear,out_size"),
 ("MLP activation str", "models.MLP((3,), activation='relu')", "error", "MLP,activation"),
 ("MLP sizes str", "models.MLP('10')", "error", "MLP,fc_output_sizes"),
 # --- optimizers
 ("SGD lr str", "optimizers.SGD(lr='0.1')", "error", "SGD,lr"),
 ("SGD lr inf", "optimizers.SGD(lr=float('inf'))", "error", "SGD,lr"),
 ("SGD lr negative", "optimizers.SGD(lr=-0.1)", "either", "SGD,lr"),
 ("MomentumSGD momentum 2", "optimizers.MomentumSGD(momentum=2.0)", "either", "MomentumSGD,momentum"),
 ("MomentumSGD momentum nan", "optimizers.MomentumSGD(momentum=float('nan'))", "error", "MomentumSGD,momentum"),
 ("Adam beta1 1", "optimizers.Adam(beta1=1.0)", "error", "Adam,beta1"),
 ("Adam beta2 nan", "optimizers.Adam(beta2=float('nan'))", "error", "Adam,beta2"),
 ("Adam eps 0", "optimizers.Adam(eps=0)", "either", "Adam,eps"),
 ("AdaGrad eps str", "optimizers.AdaGrad(eps='a')", "error", "AdaGrad,eps"),
 ("RMSProp rho nan", "optimizers.RMSProp(rho=float('nan'))", "error", "RMSProp,rho,decay"),
 ("setup None", "optimizers.SGD().setup(None)", "error", "setup,SGD,target"),
 ("setup int", "optimizers.SGD().setup(3)", "error", "setup,SGD,target"),
 ("update before setup", "optimizers.SGD().update()", "error", "update,setup"),
 ("add_hook non-callable", "optimizers.SGD().add_hook(3)", "error", "add_hook,hook"),
 ("ClipGrad nan", "optimizers.ClipGrad(float('nan'))", "error", "ClipGrad,max_norm"),
 ("ClipGrad negative", "optimizers.ClipGrad(-1.0)", "error", "ClipGrad,max_norm"),
 ("WeightDecay str", "optimizers.WeightDecay('a')", "error", "WeightDecay,rate"),
 ("SGD update grad nan", "m = L.Linear(1, in_size=1); o = optimizers.SGD().setup(m); y = F.sum(m(np.array([[np.nan]]))); y.backward(); o.update(); want(True)", "either", "SGD,update,nan"),
 # --- datasets and loaders
 ("Spiral train str", "datasets.Spiral(train='no')", "either", "Spiral,train"),
 ("Spiral transform non-callable", "datasets.Spiral(transform=3)", "error", "Spiral,transform,Dataset"),
 ("Dataset index out", "datasets.Spiral()[10**6]", "error", "Spiral,index,Dataset"),
 ("Dataset index str", "datasets.Spiral()['a']", "error", "Spiral,index,Dataset"),
 ("Dataset index float", "datasets.Spiral()[1.5]", "error", "Spiral,index,Dataset"),
 ("SinCurve train str", "datasets.SinCurve(train=None)", "either", "SinCurve,train"),
 ("DataLoader batch 0", "DataLoader(datasets.Spiral(), 0)", "error", "DataLoader,batch_size"),
 ("DataLoader batch -1", "DataLoader(datasets.Spiral(), -1)", "error", "DataLoader,batch_size"),
 ("DataLoader batch float", "DataLoader(datasets.Spiral(), 2.5)", "error", "DataLoader,batch_size"),
 ("DataLoader dataset None", "DataLoader(None, 2)", "error", "DataLoader,dataset"),
 ("DataLoader empty dataset", "list(DataLoader([], 2))", "either", "DataLoader,dataset"),
 ("SeqDataLoader batch > len", "SeqDataLoader(datasets.SinCurve(), 10**6)", "error", "SeqDataLoader,batch_size"),
 ("read_idx dir", "datasets.read_idx('/tmp')", "error", "read_idx,/tmp"),
 ("read_idx empty file", "open('/tmp/paths_sweep_empty.idx','wb').close(); datasets.read_idx('/tmp/paths_sweep_empty.idx')", "error", "paths_sweep_empty"),
 ("read_idx None", "datasets.read_idx(None)", "error", "read_idx,path"),
 ("write_idx object", "datasets.write_idx('/tmp/paths_sweep_o.idx', np.array([object()]))", "error", "write_idx,dtype"),
 ("write_idx complex", "datasets.write_idx('/tmp/paths_sweep_c.idx', np.ones(2, complex))", "error", "write_idx,dtype"),
 ("read_digits_npz garbage", "open('/tmp/paths_sweep_g.npz','wb').write(b'PK\\x03\\x04garbage'); datasets.read_digits_npz('/tmp/paths_sweep_g.npz')", "error", "paths_sweep_g"),
 ("read_mnist_csv binary", "open('/tmp/paths_sweep_b.csv','wb').write(bytes(range(256))); datasets.read_mnist_csv('/tmp/paths_sweep_b.csv')", "error", "paths_sweep_b"),
 ("get_file bad scheme", "datasets.get_file('ftp://example.invalid/x')", "either", "get_file,url,file"),
 ("get_file empty url", "datasets.get_file('')", "error", "get_file,url"),
 ("show_digits 1-d", "datasets.show_digits(np.ones(5))", "error", "show_digits,images"),
 # --- utils
 ("gradient_check f not callable", "utils.gradient_check(3, np.ones(2))", "error", "gradient_check,f"),
 ("gradient_check x empty", "utils.gradient_check(F.sin, np.ones(0))", "either", "gradient_check"),
 ("numerical_grad str eps", "utils.numerical_grad(F.sin, np.ones(2), eps='a')", "error", "numerical_grad,eps"),
 ("array_allclose (3,) vs (3,3)", "utils.array_allclose(np.ones(3), np.ones((3, 3)))", "error", "array_allclose"),
 ("array_allclose (1,) vs ()", "want(utils.array_allclose(np.ones(1), np.array(1.0)))", "ok", ""),
 ("array_allclose None", "utils.array_allclose(None, np.ones(2))", "error", "array_allclose,as_numpy"),
 ("get_conv_outsize 0 stride", "utils.get_conv_outsize(4, 3, 0, 0)", "error", "get_conv_outsize,stride"),
 ("get_dot_graph non-Variable", "utils.get_dot_graph(3)", "error", "get_dot_graph,output"),
 ("plot_dot_graph bad ext", "utils.plot_dot_graph(dz.Variable(np.ones(2)) * 2, to_file='/tmp/paths_sweep_graph.xyz')", "error", "plot_dot_graph,to_file,xyz"),
 ("sum_to str shape", "utils.sum_to(np.ones(3), 'a')", "error", "sum_to,shape"),
 ("logsumexp empty", "utils.logsumexp(np.ones((0, 3)))", "either", "logsumexp"),
 ("pair negative", "utils.pair(-1)", "either", "pair"),
 # --- memory
 ("count_live_objects generator", "M.count_live_objects(x for x in [])", "error", "count_live_objects"),
 ("reference_graph int", "M.reference_graph(3)", "error", "reference_graph"),
 ("find_leaks str", "M.find_leaks('abc', 2)", "error", "find_leaks"),
 ("no_grad as decorator arg", "dz.no_grad(3)", "error", "no_grad"),
 ("using_config unknown", "with dz.using_config('no_such_setting', True): pass", "either", "using_config,Config"),
 ("using_config value str", "with dz.using_config('enable_backprop', 'no'): pass", "either", "using_config,enable_backprop"),
]
