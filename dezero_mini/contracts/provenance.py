"""Whether a submission is the learner's own framework.

A stage file must define the stage's names (``Stage.needs``: ``Variable``,
``Function``, ...) itself. Three checks, each of which names what it found:

* ``reference_of(digest)``, without running the file: the file is one of
  the course's own ``steps/`` files, comments, docstrings and layout aside
  (its syntax tree is the same);
* ``imported_names(tree, names)``: a needed name that the file imports
  (``from dezero_mini import Variable``) instead of defining it;

the tree and its digest made by ``read_submission`` in the worker, before
any of the file's code runs (there the time and memory limits bound what a
hostile file costs to parse; the grading parent never parses a
submission): it reads at most ``MAX_SUBMISSION_BYTES`` and turns what the
parser cannot hold into a ``CannotCheck`` with a reason;
* ``borrowed_names(module, path, names)``, in the worker once the file is
  loaded: a class or function whose code lives in another file
  (``dezero_mini``, ``steps/``, ``load_stage``), wherever it was bound;
  and ``code_from_elsewhere``: code that names the file but that its text
  does not compile to (another text compiled under the file's name).
"""
import ast
import functools
import hashlib
import inspect
from pathlib import Path


def _without_docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(
                    getattr(body[0], "value", None), ast.Constant) and isinstance(
                    body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


#: The largest file taken as a submission (Gradescope's limit too): a stage
#: file is a few hundred lines (36 KB at most in the course).
MAX_SUBMISSION_BYTES = 1024 * 1024


class CannotCheck(ValueError):
    """A submission that is not parsed: too large, or beyond what the
    parser can hold. The message says why, in one line."""


def parse_submission(path):
    """The syntax tree of the submission at ``path``, read at most
    ``MAX_SUBMISSION_BYTES``; None when it does not parse (loading it in the
    worker reports the SyntaxError). CannotCheck for a larger file or one
    that the parser cannot hold (its expressions nest too deeply, or it
    needs more memory than there is): nothing a submission holds makes its
    reader raise anything else. OSError when it cannot be read."""
    path = Path(path)
    with open(path, "rb") as file:
        data = file.read(MAX_SUBMISSION_BYTES + 1)
    if len(data) > MAX_SUBMISSION_BYTES:
        raise CannotCheck(too_large(path))
    try:
        return ast.parse(data.decode("utf-8", "replace"))
    except (SyntaxError, ValueError):  # (ValueError: a null byte, on Python 3.11)
        return None
    except (RecursionError, MemoryError) as error:
        raise CannotCheck(too_complex(path, error)) from None


def too_large(path):
    """Why a file over ``MAX_SUBMISSION_BYTES`` cannot be checked."""
    return (f"{Path(path).name} is more than {MAX_SUBMISSION_BYTES} bytes, more than a stage "
            "file can be: submit the stage file alone")


def too_complex(path, error):
    """Why a file beyond the parser's limits cannot be checked."""
    return (f"{Path(path).name} is too complex to parse ({type(error).__name__}: its "
            "expressions nest too deeply or it is too large): write it as a stage file is written")


def code_fingerprint(tree):
    """The syntax tree ``tree`` without comments, docstrings and layout, as
    text (None for no tree). (RecursionError for a tree nested deeper than
    the parser's own limit: ``ast.dump`` recurses.)"""
    if tree is None:
        return None
    return ast.dump(_without_docstrings(tree))


def fingerprint_digest(tree):
    """The SHA-256 (hex) of ``code_fingerprint(tree)``, or None for no tree:
    what the worker sends the parent, which never parses a submission."""
    fingerprint = code_fingerprint(tree)
    return None if fingerprint is None else hashlib.sha256(fingerprint.encode()).hexdigest()


def _reference_digests():
    from dezero_mini.memory.stages import _discover, steps_dir

    return _digests_of(steps_dir(), tuple((number, step) for number, _, step in _discover()))


@functools.lru_cache(maxsize=None)
def _digests_of(folder, steps):
    """(number, step, digest) of the course's step files, ``steps`` as
    (number, path) (the folder keys the cache: a check of another copy of
    the course reads that one)."""
    return tuple((number, step, fingerprint_digest(ast.parse(step.read_text())))
                 for number, step in steps)


def reference_of(digest, first_stage):
    """The course's step file (a Path) of stage ``first_stage`` or later
    whose code a submission is, by the ``fingerprint_digest`` of its tree,
    or None. (The stage a learner starts from is not in that range: it
    honestly fails the new contracts.)"""
    if digest is None:
        return None
    return next((step for number, step, theirs in _reference_digests()
                 if number >= first_stage and theirs == digest), None)


def read_submission(path, names):
    """``(digest, imported)`` of the submission at ``path``, read before any
    of its code runs: its ``fingerprint_digest`` and its
    ``imported_names(tree, names)``. CannotCheck (with the reason) for a
    file too large or too complex to read; OSError when it cannot be read."""
    tree = parse_submission(path)
    try:
        return fingerprint_digest(tree), imported_names(tree, names)
    except (RecursionError, MemoryError) as error:  # a walk of a tree the parser held
        raise CannotCheck(too_complex(path, error)) from None


def _top_level_statements(body):
    """The statements that run at the top level of a module: its body, and
    the bodies of top-level ``if``, ``try``, ``with`` (not of functions)."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody"):
            yield from _top_level_statements(getattr(node, field, []) or [])
        for handler in getattr(node, "handlers", []) or []:
            yield from _top_level_statements(handler.body)


def imported_names(tree, names):
    """{name: what it imports} for each of ``names`` that the submission's
    syntax tree ``tree`` (``parse_submission``) binds with an ``import`` at
    its top level and defines nowhere else there. Empty for no tree (loading
    the file reports the SyntaxError). (A name bound only at run time, by
    ``globals().update`` or ``exec``, is ``borrowed_names``'s to find.)"""
    if tree is None:
        return {}
    defined, imported = set(), {}
    for node in _top_level_statements(tree.body):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                defined.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            origin = node.module if isinstance(node, ast.ImportFrom) else None
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                imported[bound] = f"{origin}.{alias.name}" if origin else alias.name
    return {name: imported[name] for name in names if name in imported and name not in defined}


def _code_file(obj):
    """The file of the code of a function (under its decorators), or None."""
    code = getattr(inspect.unwrap(obj), "__code__", None)
    return code.co_filename if code is not None else None


def _class_files(cls):
    """The files of the code of the methods that class ``cls`` itself defines."""
    files = {_code_file(member) for member in vars(cls).values()
             if callable(member) or isinstance(member, (staticmethod, classmethod))}
    return {Path(f).resolve().as_posix() for f in files if f}


def _true_ancestors(cls):
    """The classes that ``cls`` really derives from (the bases it was made
    with, and theirs: no metaclass's ``mro()`` answers), itself left out."""
    from dezero_mini.memory.true_types import _TRUE_BASES

    found, stack = [], list(_TRUE_BASES(cls))
    while stack:
        current = stack.pop()
        if all(current is not seen for seen in found):
            found.append(current)
            stack.extend(_TRUE_BASES(current))
    return found


def borrowed_names(module, path, names):
    """{name: where it comes from} for each of ``names`` that ``module`` (the
    learner's file at ``path``, loaded) holds but did not define: a class of
    another module, or one that derives from a class whose code is in another
    file (``class Variable(dezero_mini.Variable): pass`` is the package's
    framework under the file's name), or a function whose code is in another file."""
    own_file, found = str(Path(path).resolve()), {}
    own = {Path(own_file).as_posix()}
    for name in names:
        obj = getattr(module, name, None)
        if obj is None:
            continue
        if inspect.isclass(obj):
            files = _class_files(obj)
            if obj.__module__ != module.__name__ or files - own:
                where = sorted(files - own) or [obj.__module__]
                found[name] = f"the class comes from {where[0]}"
                continue
            for ancestor in _true_ancestors(obj):
                elsewhere = sorted(_class_files(ancestor) - own)
                if elsewhere:
                    found[name] = (f"the class derives from {ancestor.__qualname__}, whose code "
                                   f"is in {elsewhere[0]}")
                    break
        elif callable(obj):
            where = _code_file(obj)
            if where is None:
                kind = type(obj)
                if kind.__module__ != module.__name__:
                    found[name] = f"it is a {kind.__module__}.{kind.__qualname__}"
            elif Path(where).resolve() != Path(own_file):
                found[name] = f"its code is in {where}"
    return found


def own_code(path):
    """The signatures (name, first line, bytecode) of every code object that
    compiling the file at ``path`` makes, nested ones too: read before the
    file runs, they are what its own text can define. Empty when the text
    does not compile (loading it then says why)."""
    try:
        stack = [compile(Path(path).read_bytes(), str(path), "exec", dont_inherit=True)]
    except (SyntaxError, ValueError, RecursionError, MemoryError, OSError):
        return frozenset()
    found = set()
    while stack:
        code = stack.pop()
        found.add((code.co_name, code.co_firstlineno, code.co_code))
        stack.extend(const for const in code.co_consts if inspect.iscode(const))
    return frozenset(found)


def _functions_in(obj):
    """The plain functions that ``obj`` (a function, or a class and what it
    defines itself: methods, static and class methods, properties) holds."""
    if inspect.isclass(obj):
        for member in vars(obj).values():
            if isinstance(member, property):
                yield from (f for f in (member.fget, member.fset, member.fdel) if f is not None)
            else:
                yield from _functions_in(getattr(member, "__func__", member))
    elif inspect.isfunction(inspect.unwrap(obj)):
        yield inspect.unwrap(obj)


def code_from_elsewhere(module, path, own):
    """{name: what} for each top-level class or function of ``module`` (the
    learner's file at ``path``, loaded) whose code says it is the file's
    (``co_filename``) but is not one that the file's own text compiles to
    (``own``, from ``own_code`` before the file ran): another text compiled
    under the file's name (``exec(compile(the_package's_source, __file__,
    "exec"))``) or another function's code given the file's name
    (``code.replace(co_filename=...)``). Either hands in work that is not
    the learner's under the learner's name, which ``borrowed_names`` (that
    reads ``co_filename``) would take for theirs."""
    if not own:
        return {}
    found = {}
    for name, obj in list(vars(module).items()):
        if not (inspect.isclass(obj) or callable(obj)):
            continue
        for function in _functions_in(obj):
            code = function.__code__
            if code.co_filename == str(path) and (
                    code.co_name, code.co_firstlineno, code.co_code) not in own:
                found[name] = (f"{function.__qualname__}, said to be at line "
                               f"{code.co_firstlineno}, is not compiled from the file's text")
                break
    return found


def foreign_results(module):
    """{name: what it returned} for each of the framework's functions that,
    on a small graph of the file's own Variables, returns an object that is
    not one of the file's Variables (by its real type): a file whose
    functions wrap another framework's (``def add(a, b): return
    dezero_mini.add(a, b)``), or build their graph of other classes than the
    ones the checker counts, hands in work that is not its own, and its
    counts of live objects would be of nothing. Empty when every function
    returns the file's Variables, or when the graph cannot be built (the
    contracts then say why, each in its place)."""
    import numpy as np

    from dezero_mini.memory.true_types import is_instance

    Variable = getattr(module, "Variable", None)
    try:
        x, W = Variable(np.ones((4, 3))), Variable(np.full((3, 2), 0.5))
        h = module.matmul(x, W)
        s = module.sigmoid(h)
        results = {"matmul": h, "sigmoid": s, "sum": module.sum(s), "add": module.add(s, s),
                   "mul": module.mul(s, s),
                   "mean_squared_error": module.mean_squared_error(s, Variable(np.zeros((4, 2))))}
    except Exception:
        return {}
    found = {}
    for name, value in results.items():
        if not is_instance(value, (Variable,)):
            kind = type(value)
            found[name] = f"{kind.__module__}.{kind.__qualname__}" + (
                ", a class of the same name" if kind.__qualname__ == "Variable" else "")
    return found
