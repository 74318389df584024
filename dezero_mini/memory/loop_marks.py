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
from pathlib import Path

ROUND = "__dezero_mini_leaks_round__"  # a dunder name: never shown as a root


class _MarkLoopRounds(ast.NodeTransformer):
    """Put ``ROUND(k)`` at the top of the body of every loop statement;
    ``lines[k]`` is loop k's line."""

    def __init__(self):
        self.lines = []

    def _loop(self, node):
        self.generic_visit(node)
        call = ast.Expr(ast.Call(ast.Name(ROUND, ast.Load()), [ast.Constant(len(self.lines))], []))
        for piece in ast.walk(call):  # the location of the body's first line
            ast.copy_location(piece, node.body[0])
        node.body.insert(0, call)
        self.lines.append(node.lineno)
        return node

    visit_For = visit_AsyncFor = visit_While = _loop


def compile_with_loop_marks(source, filename):
    """(the code of the script with a mark at each round of its loops, the
    line of each loop). Raises SyntaxError as ``compile`` would."""
    tree = ast.parse(source, filename)
    marker = _MarkLoopRounds()
    tree = marker.visit(tree)
    return compile(tree, filename, "exec", dont_inherit=True), marker.lines


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
