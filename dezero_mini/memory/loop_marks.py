"""Mark each round of a script's loops, without the script's help.

``leaks`` needs the iterations of the learner's loops, and the learner's
script does not cooperate. So it parses the script and, before compiling
it, puts one call at the top of the body of every ``for``, ``async for`` and
``while`` statement of the file (in its functions and methods too;
comprehensions are expressions, not loops of the training, and are left
alone): ``__dezero_mini_leaks_round__(k)``, k naming the loop. Each call
after a loop's first is the end of one of its iterations. The line numbers
stay the script's own, so its tracebacks read as usual. Both the
dezero_mini runner (:mod:`dezero_mini.cli.leaks`) and the PyTorch one
(:mod:`dezero_mini.memory.torch_leaks`) compile scripts this way, and run
them as ``python SCRIPT`` would with :func:`script_as_main`.
"""
import ast
import builtins
import contextlib
import sys
import types
from dataclasses import dataclass
from pathlib import Path

ROUND = "__dezero_mini_leaks_round__"  # a dunder name: never shown as a root
ENTER = "__dezero_mini_leaks_enter__"  # called before a loop statement starts (mark_entries)


@dataclass(frozen=True)
class LoopMark:
    """A loop of the script: its ``line`` and ``depth`` (0 for a loop that
    is in no other loop of its function; comprehensions are not loops here)."""

    line: int
    depth: int


class _MarkLoopRounds(ast.NodeTransformer):
    """Put ``ROUND(k)`` at the top of the body of every loop statement (and,
    with ``mark_entries``, ``ENTER(k)`` just before the statement: the next
    round is the first of a new run of the loop); ``loops[k]`` is loop k."""

    def __init__(self, mark_entries):
        self.loops = []
        self.mark_entries = mark_entries
        self.depth = 0

    def _call(self, name, number, where):
        call = ast.Expr(ast.Call(ast.Name(name, ast.Load()), [ast.Constant(number)], []))
        for piece in ast.walk(call):
            ast.copy_location(piece, where)
        return call

    def _loop(self, node):
        number = len(self.loops)
        self.loops.append(LoopMark(node.lineno, self.depth))
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        node.body.insert(0, self._call(ROUND, number, node.body[0]))  # the body's first line
        return [self._call(ENTER, number, node), node] if self.mark_entries else node

    def _function(self, node):  # a loop in a function called from a loop is not nested in it
        depth, self.depth = self.depth, 0
        self.generic_visit(node)
        self.depth = depth
        return node

    visit_For = visit_AsyncFor = visit_While = _loop
    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function


def compile_with_loop_marks(source, filename, mark_entries=False):
    """(the code of the script with a mark at each round of its loops, the
    ``LoopMark`` of each loop). Raises SyntaxError as ``compile`` would."""
    tree = ast.parse(source, filename)
    marker = _MarkLoopRounds(mark_entries)
    tree = marker.visit(tree)
    return compile(tree, filename, "exec", dont_inherit=True), marker.loops


def new_main_module(path):
    """An empty module to run the script ``path`` in, named ``__main__``."""
    module = types.ModuleType("__main__")
    module.__file__ = str(path)
    module.__builtins__ = builtins
    return module


@contextlib.contextmanager
def script_as_main(path, module, script_args):
    """While the block runs, ``module`` is ``__main__``, ``sys.argv`` is the
    script's, and the script's folder is first on ``sys.path``, as
    ``python SCRIPT ARGS`` makes them; all three are put back afterwards."""
    saved = sys.argv, list(sys.path), sys.modules.get("__main__")
    sys.argv = [str(path), *script_args]
    sys.path.insert(0, str(Path(path).resolve().parent))
    sys.modules["__main__"] = module
    try:
        yield module
    finally:
        sys.argv, sys.path[:] = saved[0], saved[1]
        if saved[2] is not None:
            sys.modules["__main__"] = saved[2]
        with contextlib.suppress(AttributeError, ValueError):  # the script may have closed
            sys.stdout.flush()  # (or replaced) sys.stdout: its output is then its own
