"""``grade --isolation container``: each submission checked in a container of its own.

For a class of hundreds, each check runs where Gradescope, Otter-Grader and
CodeGrade run theirs: a Podman or Docker container made from an image of the
course, thrown away afterwards. The container sees the submission (a copy, read-only),
the weights (read-only) and the course installed in the image; not the
grading machine's files, processes, network or environment, nor another
submission. It runs as ``nobody``, without capabilities, on a read-only
file system with a private ``/tmp``, and its memory and processes are
bounded as a whole (``RUN_LIMITS``): the container's cgroup holds every
process the check starts.

``ContainerIsolation.prepare`` finds the engine, builds the image from
``graders/container/Containerfile`` and the course's checkout when it is not
there yet (its tag is a hash of the files copied in, so a changed course gets
a new image) and starts one container to see that the engine can; anything
that fails is a ``ContainerError``: one line that names the engine, what
failed, and what to install or change. ``run_check`` is the hook that
``grade`` calls for each submission instead of starting ``check`` itself.
"""
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

#: The engines looked for, in this order, when none is named.
ENGINES = ("podman", "docker")
#: The grading image's name; its tag is the hash of the course (``image_name``).
IMAGE = "localhost/dezero_mini-grader"
#: The image the grading image is built on (needs python3 with venv and pip).
DEFAULT_BASE = "docker.io/library/python:3.11-slim-bookworm"
#: The Python of the course in the image (the Containerfile's virtual environment).
PYTHON = "/opt/dezero_mini/bin/python"
#: Where the submission's copy and the weights appear in the container.
SUBMISSION_FOLDER, WEIGHTS_PATH = "/submission", "/grading/weights.json"
#: What makes up the course in the image, relative to its checkout.
COURSE_PARTS = ("pyproject.toml", "README.md", "LICENSE", "dezero_mini", "steps")
CONTAINERFILE = Path("graders") / "container" / "Containerfile"

#: How every container runs. The memory bound is the whole container's (the
#: check, its worker and anything the worker starts), above the worker's own
#: 2048 MiB address-space limit; the explicit ulimits are below what a
#: container may set without CAP_SYS_RESOURCE (Podman as root otherwise asks
#: for more open files and processes than such a machine allows, and the
#: runtime refuses to start).
RUN_LIMITS = (
    "--network", "none", "--read-only", "--tmpfs", "/tmp:rw,size=512m,mode=1777",
    "--memory", "2560m", "--memory-swap", "2560m", "--pids-limit", "256", "--cpus", "1",
    "--cap-drop", "all", "--security-opt", "no-new-privileges", "--user", "65534:65534",
    "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
)

#: Seconds allowed to the engine for what is not a check: building the image,
#: starting the trial container, removing a container left behind.
BUILD_SECONDS, PROBE_SECONDS, REMOVE_SECONDS = 3600, 300, 60

#: Known ways an engine fails on a machine, and the fix (a part of the
#: engine's message, the advice appended to the error).
ADVICE = (
    ("cgroups in hybrid mode not supported",
     "crun refuses a machine whose cgroups mix v1 and v2: install runc (apt-get install runc) "
     "and set runtime = \"runc\" under [engine] in containers.conf"),
    ("Cannot connect to the Docker daemon",
     "the Docker engine is not running: start it (systemctl start docker), or install Podman, "
     "which needs no daemon (apt-get install podman runc)"),
    ("permission denied while trying to connect to the Docker daemon",
     "this user may not use Docker: grade as a member of the docker group, or use Podman"),
    ("pinging container registry",
     "no image registry is reachable: build a base image here and give it with --base-image "
     "(the lab chapter says how)"),
    ("setrlimit",
     "the engine asked for a resource limit above this machine's: lower its default_ulimits "
     "in containers.conf"),
)


class ContainerError(RuntimeError):
    """The container engine cannot grade here (missing, refuses, cannot build):
    one line, with the engine, what failed and what to do."""


def find_engine(name=None):
    """The path of the container engine ``name`` (``podman`` or ``docker``), or
    of the first of ``ENGINES`` on PATH when ``name`` is None."""
    names = (name,) if name else ENGINES
    for each in names:
        path = shutil.which(each)
        if path:
            return path
    raise ContainerError(
        f"--isolation container: no container engine: looked for {' and '.join(names)} on "
        "PATH; install Podman (apt-get install podman runc) or Docker, or grade without "
        "--isolation container")


def course_checkout():
    """The checkout of the course that this package runs from (an editable
    install): the image is built from it."""
    root = Path(__file__).resolve().parents[2]
    missing = [part for part in COURSE_PARTS if not (root / part).exists()]
    if missing or not (root / CONTAINERFILE).is_file():
        raise ContainerError(
            f"--isolation container: the grading image is built from the course's checkout, and "
            f"{root} is not one (no {', '.join(missing) or CONTAINERFILE}): install the course "
            "with pip install --editable CHECKOUT")
    return root


def course_files(root):
    """The files copied into the image, as sorted paths relative to ``root``
    (caches and build products left out)."""
    found = []
    for part in COURSE_PARTS:
        path = root / part
        if path.is_file():
            found.append(Path(part))
            continue
        for file in path.rglob("*"):
            relative = file.relative_to(root)
            if any(piece == "__pycache__" or piece.endswith(".egg-info")
                   for piece in relative.parts) or file.suffix == ".pyc":
                continue
            if file.is_file():
                found.append(relative)
    return sorted(found)


def image_name(root):
    """``IMAGE:tag``, the tag a hash of the Containerfile and of every course
    file copied into the image (names and bytes)."""
    digest = hashlib.sha256((root / CONTAINERFILE).read_bytes())
    for relative in course_files(root):
        digest.update(b"\0" + relative.as_posix().encode() + b"\0")
        digest.update((root / relative).read_bytes())
    return f"{IMAGE}:{digest.hexdigest()[:16]}"


def _last_line(text):
    """The last line of an engine's output that says something, with the
    advice for a failure that ``ADVICE`` knows."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = lines[-1][-300:] if lines else "(no message)"  # a pip log can end in a long line
    for part, advice in ADVICE:
        if part in text:
            return f"{last} ({advice})"
    return last


def _engine(argv, seconds, what):
    """Run the engine for one of the steps that are not a check; a
    ContainerError that names ``what`` when it cannot."""
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=seconds)
    except subprocess.TimeoutExpired:
        raise ContainerError(f"--isolation container: {Path(argv[0]).name} did not {what} "
                             f"in {seconds} s") from None
    except OSError as error:
        raise ContainerError(f"--isolation container: cannot run {argv[0]} to {what}: "
                             f"{error.strerror or error}") from None


def build_context(root, folder):
    """Lay out the build folder: the Containerfile, and the course under ``course/``."""
    folder = Path(folder)
    shutil.copyfile(root / CONTAINERFILE, folder / "Containerfile")
    for relative in course_files(root):
        target = folder / "course" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / relative, target)


def build_argv(engine, image, base, folder):
    """The engine's command line that builds ``image`` on ``base`` from ``folder``."""
    return [engine, "build", "--build-arg", f"BASE={base}", "--tag", image,
            "--file", str(Path(folder) / "Containerfile"), str(folder)]


class ContainerIsolation:
    """Checks each submission in a container of ``image``, run by ``engine``
    (a path). Made by ``prepare``; ``grade`` calls ``run_check``."""

    def __init__(self, engine, image):
        self.engine, self.image = engine, image

    @classmethod
    def prepare(cls, engine=None, base=DEFAULT_BASE, tell=None):
        """Find the engine, build the image if it is not there, and start one
        container to see that the engine can. ``tell(text)`` hears of a build."""
        path = find_engine(engine)
        scratch = tempfile.gettempdir()  # where grade copies each submission, to mount it
        if ":" in scratch:
            raise ContainerError(
                f"--isolation container: the temporary folder {scratch!r} holds a ':', which "
                "the engine's --volume reads as a separator: set TMPDIR to a folder without one")
        root = course_checkout()
        image = image_name(root)
        name = Path(path).name
        if _engine([path, "image", "inspect", image], PROBE_SECONDS,
                   "look for the grading image").returncode != 0:
            if tell:
                tell(f"building the grading image {image} on {base} with {name} (once for "
                     "each version of the course; pip installs the course in it)")
            started = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="dezero_mini_image_") as folder:
                build_context(root, folder)
                done = _engine(build_argv(path, image, base, folder), BUILD_SECONDS,
                               "build the grading image")
            if done.returncode != 0:
                raise ContainerError(
                    f"--isolation container: {name} could not build the grading image on "
                    f"{base}: {_last_line(done.stderr + done.stdout)}")
            if tell:
                tell(f"built {image} in {time.monotonic() - started:.0f} s")
        isolation = cls(path, image)
        isolation.probe()
        return isolation

    def probe(self):
        """Start one container as the checks will; a ContainerError if it fails."""
        done = _engine(self.run_argv("dezero_mini_probe_" + uuid.uuid4().hex[:12],
                                     [PYTHON, "-I", "-c", "import dezero_mini.contracts.runner"]),
                       PROBE_SECONDS, "start a container")
        if done.returncode != 0:
            raise ContainerError(
                f"--isolation container: {Path(self.engine).name} could not start a container "
                f"from {self.image}: {_last_line(done.stderr + done.stdout)}")

    def run_argv(self, name, command, mounts=()):
        """The engine's command line that runs ``command`` in a throwaway
        container named ``name``, with ``mounts`` (host path, container path)
        read-only."""
        argv = [self.engine, "run", "--rm", "--name", name, *RUN_LIMITS]
        for host, inside in mounts:
            argv += ["--volume", f"{host}:{inside}:ro"]
        return [*argv, self.image, *command]

    def check_command(self, grading, file):
        """``check``'s command line in the container, for a submission copied to
        ``SUBMISSION_FOLDER/file.name``: the grader's own ``check_argv`` with the
        paths of the container, its weights read from ``WEIGHTS_PATH`` (the
        container's standard input is not the grader's), and bubblewrap's
        sandbox used where the image has it (the container is the sandbox)."""
        host = grading.check_argv(file)
        command = [PYTHON, "-I", "-m", "dezero_mini"]
        inside = {str(Path(file).resolve()): f"{SUBMISSION_FOLDER}/{Path(file).name}"}
        arguments = host[host.index("check"):]
        for before, argument in zip([None, *arguments], arguments):
            if before == "--weights":
                argument = WEIGHTS_PATH
            elif before == "--sandbox":
                argument = "auto"
            command.append(inside.get(argument, argument))
        return command

    def run_check(self, grading, file, running, scratch):
        """Check ``file`` in a container: ``running.run``'s ``(exit code,
        stdout, stderr)``, or None once grading is stopping. ``scratch``: a
        folder of this check's own, removed by the caller."""
        from dezero_mini.contracts import get_stage

        folder = Path(tempfile.mkdtemp(prefix="container_", dir=scratch))
        try:
            submission = folder / "submission"
            submission.mkdir()
            copy = submission / get_stage(grading.number).file_name
            try:  # a copy: the container sees this file alone, never the student's folder
                shutil.copyfile(file, copy)
            except OSError as error:
                return 2, b"", f"cannot read {file}: {error.strerror or error}".encode()
            # The container runs as nobody: it must be able to read them.
            os.chmod(submission, 0o755)
            os.chmod(copy, 0o644)
            mounts = [(submission, SUBMISSION_FOLDER)]
            if grading.weights is not None:  # as read once, before any submission ran
                weights = folder / "weights.json"
                weights.write_bytes(grading.weights_input())
                os.chmod(weights, 0o644)
                mounts.append((weights, WEIGHTS_PATH))
            name = "dezero_mini_grade_" + uuid.uuid4().hex[:12]
            argv = self.run_argv(name, self.check_command(grading, copy), mounts)
            done = running.run(argv, scratch, grading.check_limit())
            if done is None or done[0] is None or done[0] < 0:
                # The engine's client was killed (a time limit, Ctrl-C): the
                # container may outlive it (Podman's conmon keeps it).
                self.remove(name)
            return done
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def remove(self, name):
        """Remove the container ``name`` if it is still there (quietly: it
        is gone already when the engine ended it)."""
        try:
            subprocess.run([self.engine, "rm", "--force", name], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=REMOVE_SECONDS)
        except (OSError, subprocess.TimeoutExpired):
            pass
