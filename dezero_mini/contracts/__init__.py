"""The memory contract of each stage of the course, defined once.

A *contract* is one property that a stage's framework must have, measured
on a stage module: "the live objects return to a constant after each
batch", "``no_grad()`` restores the mode after an exception". Each one has

* a ``name`` (``live_objects_constant``),
* the stage it starts at (``stage``) and, for the properties that a later
  stage fixes on purpose (stage 01's leak), the last stage it holds at
  (``until``); every later stage that builds on it (``Stage.builds_on``,
  ``lineage``) is held to it too,
* ``measure(module)``, which runs the experiment and returns a
  ``Measurement``: ``(passed, expected, measured)``, the two last in words,
* a ``hint`` that points at the idea of the stage, never at the answer.

The same objects serve two masters: ``tests/`` runs them on ``steps/`` (the
course's own snapshots), and ``python -m dezero_mini check N FILE`` runs
them on a learner's file (``dezero_mini.contracts.runner``).

Each stage is one small module of this package, ``stageNN.py``: its
metadata (a ``Stage``: number, name, title, the idea, what to change, the
names the checker needs, the stage it builds on) and its contracts, made
with ``@STAGE.contract``. A new stage of the course gets ``start`` and ``check`` by adding its
module here; nothing else needs to change.
"""
import importlib
import pkgutil
import re
from dataclasses import dataclass, field
from typing import Callable, Optional

_STAGE_MODULE = re.compile(r"^stage(\d\d)$")

#: The stage number that the finished package ``dezero_mini`` stands for:
#: after every stage of the course, so that every contract without an end
#: holds for it.
FINISHED = 99


@dataclass(frozen=True)
class Measurement:
    """What a contract found: ``passed``, and what was ``expected`` and
    ``measured``, in words a learner can compare."""

    passed: bool
    expected: str
    measured: str

    @classmethod
    def from_problems(cls, problems, expected, otherwise="as expected"):
        """Passed when ``problems`` (sentences, each one thing that was wrong)
        is empty; measured: the problems, or ``otherwise`` when there are none."""
        return cls(passed=not problems, expected=expected,
                   measured="; ".join(problems) or otherwise)


@dataclass(frozen=True)
class Contract:
    """One property of a stage's framework (see the module's docstring)."""

    name: str
    stage: int
    summary: str  # one line, without a full stop
    hint: str
    measure: Callable
    until: Optional[int] = None
    #: Whether its verdict reads the bench's training record: its result must
    #: then carry the record's digest, which the checker holds against the
    #: figures streamed (``contracts.figures``).
    reads_record: bool = False

    def holds_at(self, number):
        """Whether a framework at stage ``number`` must keep this contract:
        its stage is one that stage ``number`` builds on (``lineage``), and
        ``number`` is not past ``until``."""
        return self.stage in lineage(number) and (self.until is None or number <= self.until)

    def check(self, module):
        """Measure ``module`` and return a ``Measurement``. Whatever graphs
        the measurement left alive are freed afterwards (stage 01 keeps them
        in a registry, stage 02 in cycles), so that they do not weigh on the
        next contract's figures."""
        from dezero_mini.contracts.bench import forget_graphs

        try:
            result = self.measure(module)
        finally:
            forget_graphs(module)
        if not isinstance(result, Measurement):
            raise TypeError(f"contract {self.name}: measure returned {type(result).__name__}, "
                            "not a Measurement")
        return result

    def __repr__(self):
        span = f"{self.stage:02d}" + (f"-{self.until:02d}" if self.until else "+")
        return f"Contract({self.name}, stages {span})"


@dataclass
class Stage:
    """The metadata of one stage of the course, and its contracts.

    number, name: as in ``steps/stepNN_<name>.py``; title: a short phrase;
    idea: one or two sentences on what the stage teaches; change: what a
    learner changes in the previous stage's file to get this one (it
    becomes the header of ``start``); needs: the names a stage module must
    define from this stage on (the checker refuses a file without them);
    builds_on: the stage whose step file this one starts from (``start``
    writes it, the book shows the diff against it, and this stage keeps
    its contracts): the previous number unless a stage says otherwise, as
    stage 10 does (it starts from stage 08's framework, not from 09's
    planner).
    """

    number: int
    name: str
    title: str
    idea: str
    change: str
    needs: tuple = ()
    contracts: list = field(default_factory=list)
    builds_on: Optional[int] = None

    def __post_init__(self):
        if self.builds_on is None:
            self.builds_on = self.number - 1
        if not 0 <= self.builds_on < self.number:
            raise ValueError(f"stage {self.number}: builds_on must be an earlier stage "
                             f"(or 0 for none), got {self.builds_on}")

    @property
    def file_name(self):
        return f"step{self.number:02d}_{self.name}.py"

    @property
    def label(self):
        return f"stage {self.number:02d} ({self.title})"

    def contract(self, hint, until=None, reads_record=False):
        """Decorator: make ``measure(module)`` a contract of this stage,
        named after the function, summarised by its docstring's first line
        (``reads_record``: its verdict reads ``bench(module).record``)."""

        def make(measure):
            summary = (measure.__doc__ or measure.__name__).strip().splitlines()[0].rstrip(".")
            made = Contract(name=measure.__name__, stage=self.number, summary=summary,
                            hint=" ".join(hint.split()), measure=measure, until=until,
                            reads_record=reads_record)
            self.contracts.append(made)
            return made

        return make


_stages = None


def stages():
    """Every stage that has contracts, in course order (imports the
    ``stageNN`` modules of this package the first time)."""
    global _stages
    if _stages is None:
        found = []
        for info in pkgutil.iter_modules(__path__):
            if _STAGE_MODULE.match(info.name):
                found.append(importlib.import_module(f"{__name__}.{info.name}").STAGE)
        _stages = sorted(found, key=lambda stage: stage.number)
    return _stages


def get_stage(number):
    """The ``Stage`` numbered ``number``; ValueError naming the known ones."""
    for stage in stages():
        if stage.number == number:
            return stage
    known = ", ".join(str(stage.number) for stage in stages())
    raise ValueError(f"stage {number} has no contracts; stages with contracts: {known}")


def lineage(number):
    """The stages whose framework stage ``number`` carries: itself, the stage
    it builds on, that one's, and so on down to stage 01 (``builds_on``).
    For a number that is not a stage of the course (``FINISHED``, the
    package ``dezero_mini``) every stage up to it: the finished framework
    has every fix."""
    by_number = {stage.number: stage for stage in stages()}
    if number not in by_number:
        return set(range(1, number + 1))
    found = set()
    while number >= 1 and number not in found:
        found.add(number)
        stage = by_number.get(number)
        number = stage.builds_on if stage is not None else number - 1
    return found


def contracts_at(number):
    """Every contract that a framework at stage ``number`` must keep, in
    course order: its own and those of the stages it builds on that still
    hold (``lineage``)."""
    return [contract for stage in stages() for contract in stage.contracts
            if contract.holds_at(number)]


def all_contracts():
    """Every contract of every stage, in course order."""
    return [contract for stage in stages() for contract in stage.contracts]


def names_needed_at(number):
    """The names a stage module must define at stage ``number``."""
    names = []
    carried = lineage(number)
    for stage in stages():
        if stage.number in carried:
            names.extend(name for name in stage.needs if name not in names)
    return names


def missing_names(module, number):
    """The names that stage ``number`` needs and ``module`` lacks."""
    return [name for name in names_needed_at(number) if not hasattr(module, name)]


#: The types whose ``==`` is the interpreter's own: a value of exactly one of them
#: cannot answer a comparison for itself.
_PLAIN = (bool, int, float, str)


def plainly_equal(got, expected):
    """Whether ``got`` (values read from the learner's framework) is the list
    of plain values ``expected``, each of exactly a plain type and equal to
    the one expected: never through ``got``'s own ``__eq__``. (``seen ==
    [True, False, True]`` asks each of ``seen``'s values first, and an object
    of the file's can say that it equals anything: a ``using_config`` that
    did not nest passed so.)"""
    return (type(got) is list and len(got) == len(expected)
            and all(type(value) in _PLAIN and type(wanted) in _PLAIN and value == wanted
                    for value, wanted in zip(got, expected)))


def stage_number_of(module):
    """The stage number of a module of the course: its ``STAGE`` (``"03"``),
    or ``FINISHED`` for the package ``dezero_mini``."""
    stage = getattr(module, "STAGE", None)
    return FINISHED if stage == "dezero_mini" else int(stage)
