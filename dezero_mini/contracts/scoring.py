"""Which contracts a check runs, and how many points each one is worth.

A grade must not depend on which of a stage's contracts happened to run:
``check`` reports every contract of the stage (or of the ``--contract``
selection), and each carries points. By default the contracts new in the
stage weigh ``NEW_POINTS`` and the inherited ones ``INHERITED_POINTS``: the
untouched starting file (the previous stage, which keeps every inherited
contract) then earns a third of the points, not a half.

An instructor changes the points in one weights file, TOML or JSON, read by
``Weights.from_file``::

    new = 2          # a contract new in the stage being checked
    inherited = 1    # a contract that the stage carries from an earlier one

    [contracts]      # one contract, at every stage that checks it
    training_learns = 0.5

    [stages.3]       # one contract at one stage only (wins over the above)
    live_objects_constant = 4

The file comes from outside: every key and value is checked before it is
used, and anything unexpected is an error that names the file, the key and
the fix (``WeightsError``).
"""
import difflib
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from dezero_mini.atomic import not_a_file
from dezero_mini.contracts import all_contracts, contracts_at, get_stage, stages

#: Default points of a contract that is new in the stage being checked, and
#: of one inherited from an earlier stage.
NEW_POINTS = 2
INHERITED_POINTS = 1
#: The most points one contract may carry (a weight is a share of a grade,
#: not an amount: this only keeps totals finite and readable).
MAX_POINTS = 1000
#: A weights file is a few lines; anything larger is not one.
MAX_WEIGHTS_BYTES = 64 * 1024

_TOP_LEVEL = ("new", "inherited", "contracts", "stages")


class WeightsError(ValueError):
    """A weights file that cannot be used; the message says why and how to fix it."""


def select_contracts(number, names=None):
    """The contracts that a check of stage ``number`` runs: all of the
    stage's (``contracts_at``), or only those named in ``names``, always
    in course order. A name that the stage does not check is a ValueError
    that lists the ones it does."""
    contracts = contracts_at(number)
    if not names:
        return contracts
    known = {contract.name for contract in contracts}
    unknown = [name for name in dict.fromkeys(names) if name not in known]
    if unknown:
        raise ValueError(
            f"stage {number:02d} has no contract {_names(unknown)}{_close_match(unknown[0], known)};"
            f" its contracts: {', '.join(contract.name for contract in contracts)}")
    wanted = set(names)
    return [contract for contract in contracts if contract.name in wanted]


def _names(names):
    return ", ".join(repr(name) for name in names)


def _close_match(name, known):
    found = difflib.get_close_matches(name, sorted(known), n=1)
    return f" (did you mean {found[0]!r}?)" if found else ""


def display_points(value):
    """Points as people write them: ``2`` rather than ``2.0``, ``0.5`` as is."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class Weights:
    """Points per contract: ``new`` and ``inherited`` by default, ``contracts``
    for a contract wherever it is checked, ``stages[N]`` at stage N only."""

    new: float = NEW_POINTS
    inherited: float = INHERITED_POINTS
    contracts: dict = field(default_factory=dict)
    stages: dict = field(default_factory=dict)
    source: str = "the default weights"
    path: Optional[Path] = field(default=None, compare=False)  # the file read, if any

    def points(self, contract, number):
        """The points that ``contract`` is worth in a check of stage ``number``."""
        at_stage = self.stages.get(number, {})
        if contract.name in at_stage:
            return at_stage[contract.name]
        if contract.name in self.contracts:
            return self.contracts[contract.name]
        return self.new if contract.stage == number else self.inherited

    def points_at(self, number, contracts=None):
        """``{name: points}`` for ``contracts`` (default: every contract of
        stage ``number``). A WeightsError when they add up to nothing: a
        grade out of 0 points is no grade."""
        contracts = contracts_at(number) if contracts is None else contracts
        points = {contract.name: self.points(contract, number) for contract in contracts}
        if contracts and not sum(points.values()) > 0:
            raise WeightsError(f"{self.source}: the contracts checked at stage {number:02d} "
                               "are worth 0 points in all; give at least one of them points")
        return points

    def as_mapping(self):
        """The weights as ``from_mapping`` reads them (a weights file's content)."""
        return {"new": self.new, "inherited": self.inherited, "contracts": dict(self.contracts),
                "stages": {str(number): dict(table) for number, table in self.stages.items()}}

    @classmethod
    def from_file(cls, path):
        """Read and check a weights file (``.toml`` or ``.json``)."""
        path = Path(path)
        data = _read_weights_file(path)
        return replace(cls.from_mapping(data, source=f"weights file {str(path)!r}"), path=path)

    @classmethod
    def from_standard_input(cls):
        """Weights as JSON on standard input (at most ``MAX_WEIGHTS_BYTES``)."""
        import json
        import sys

        what = "weights on standard input"
        text = sys.stdin.read(MAX_WEIGHTS_BYTES + 1)
        if len(text) > MAX_WEIGHTS_BYTES:
            raise WeightsError(f"{what}: too large for weights (at most {MAX_WEIGHTS_BYTES} bytes)")
        try:
            data = json.loads(text)
        except ValueError as error:
            raise WeightsError(f"{what}: not JSON ({error})") from None
        return cls.from_mapping(data, source=what)

    @classmethod
    def from_mapping(cls, data, source="weights"):
        """Weights from parsed TOML or JSON, every key and value checked."""
        _check_keys(data, _TOP_LEVEL, f"{source}: expected a table of weights at the top level",
                    f"{source}: unknown key", f"a weights file has only {', '.join(_TOP_LEVEL)}")
        new = _points(data.get("new", NEW_POINTS), source, "new")
        inherited = _points(data.get("inherited", INHERITED_POINTS), source, "inherited")
        every = {contract.name for contract in all_contracts()}
        contracts = _points_table(data.get("contracts", {}), every, source, "contracts",
                                  "a contract of the course")
        by_stage = {}
        stage_tables = data.get("stages", {})
        if not isinstance(stage_tables, dict):
            raise WeightsError(f"{source}: 'stages' must be a table of stage numbers, "
                               f"got {type(stage_tables).__name__}")
        for key, table in stage_tables.items():
            number = _stage_key(key, source)
            names = {contract.name for contract in contracts_at(number)}
            by_stage[number] = _points_table(table, names, source, f"stages.{key}",
                                             f"a contract of stage {number:02d}")
        return cls(new=new, inherited=inherited, contracts=contracts, stages=by_stage,
                   source=source)


def _read_weights_file(path):
    what = f"weights file {str(path)!r}"
    if path.suffix.lower() not in (".toml", ".json"):
        raise WeightsError(f"{what}: the name must end in .toml or .json")
    try:
        kind = not_a_file(path)  # a pipe or /dev/zero would be read for ever
        if kind is not None:
            raise WeightsError(f"{what} {kind}; give a .toml or .json file of weights")
        size = path.stat().st_size
        if size > MAX_WEIGHTS_BYTES:
            raise WeightsError(f"{what}: {size} bytes is too large for a weights file "
                               f"(at most {MAX_WEIGHTS_BYTES})")
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise WeightsError(f"{what}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise WeightsError(f"{what}: cannot read it ({error.strerror})") from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text, parse_constant=_refuse_constant)
        except ValueError as error:
            raise WeightsError(f"{what}: not valid JSON ({error})") from None
    toml = _toml_module()
    if toml is None:
        raise WeightsError(f"{what}: reading TOML needs Python 3.11 or newer (or the tomli "
                           "package); write the same weights as a .json file")
    try:
        return toml.loads(text)
    except ValueError as error:  # TOMLDecodeError, and a whole number of over 4300 digits
        raise WeightsError(f"{what}: not valid TOML ({error})") from None


def _refuse_constant(name):
    # json.loads accepts NaN and Infinity, which JSON itself does not have.
    raise ValueError(f"{name} is not a number JSON allows")


def _toml_module():
    try:
        import tomllib
        return tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli
            return tomli
        except ImportError:
            return None


def _points(value, source, key):
    """A number of points: a finite int or float from 0 to MAX_POINTS (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise WeightsError(f"{source}: {key} must be a number of points, "
                           f"got {type(value).__name__} {value!r}")
    if not (math.isfinite(value) and 0 <= value <= MAX_POINTS):
        raise WeightsError(f"{source}: {key} must be a number from 0 to {MAX_POINTS}, "
                           f"got {value!r}")
    return value


def _check_keys(table, known, not_a_table, unknown_key, listing):
    """A WeightsError unless ``table`` is a dict whose keys are all in ``known``."""
    if not isinstance(table, dict):
        raise WeightsError(f"{not_a_table}, got {type(table).__name__}")
    unknown = [key for key in table if key not in known]
    if unknown:
        raise WeightsError(f"{unknown_key} {_names(unknown)}"
                           f"{_close_match(str(unknown[0]), known)}; {listing}")


def _points_table(table, known, source, key, what):
    _check_keys(table, known, f"{source}: {key} must be a table of contract names and points",
                f"{source}: {key}: not {what}:", f"known: {', '.join(sorted(known))}")
    return {name: _points(value, source, f"{key}.{name}") for name, value in table.items()}


def _stage_key(key, source):
    known = ", ".join(str(stage.number) for stage in stages())
    text = str(key)
    try:
        number = int(text) if text.isdecimal() else None
        get_stage(number)
    except (TypeError, ValueError):
        raise WeightsError(f"{source}: stages.{text} is not a stage with contracts; "
                           f"the stages are {known}") from None
    return number
