"""Stop IPython from keeping cell results alive.

IPython remembers the value of every cell that ends in an expression: in
``Out[n]`` and ``_n``, in ``_``, ``__`` and ``___``, and in the shell's
``last_execution_result``. A cell ending in ``loss`` would keep that loss,
and with it the whole graph behind it, alive for the rest of the session:
a leak that the framework has nothing to do with, and one that a lesson
measuring memory must rule out.
"""
import sys


def _forget_result(result):
    """post_run_cell hook: drop the value that the ExecutionResult keeps
    (``shell.last_execution_result.result``) once it has been displayed."""
    result.result = None


def disable_output_cache():
    """Switch off IPython's output cache for the rest of the session.

    Existing entries (``Out``, ``_1``..., ``_``, ``__``, ``___``) are
    flushed, then the displayhook's cache size is set to 0, which is how
    IPython's own ``cache_size=0`` setting disables it (the displayhook then
    stores nothing in the user namespace), and the last cell's value is
    dropped from ``last_execution_result`` after each cell. Values are still
    displayed. Returns True in IPython; outside IPython it does nothing and
    returns False.
    """
    if "IPython" not in sys.modules:  # not imported: certainly not running in IPython
        return False
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None or getattr(shell, "displayhook", None) is None:
        return False
    hook = shell.displayhook
    if getattr(hook, "do_full_cache", False):
        hook.flush()  # empties Out and the _n names, resets _ __ ___, collects
        # flush() leaves _, __ and ___ alone when builtins has a "_" of its own
        # (as in a Jupyter kernel), and IPython keeps a second copy of them in
        # user_ns_hidden: reset both.
        for namespace in (shell.user_ns, getattr(shell, "user_ns_hidden", {})):
            for name in ("_", "__", "___"):
                if name in namespace:
                    namespace[name] = ""
    hook.cache_size = 0
    hook.do_full_cache = 0
    if shell.last_execution_result is not None:
        shell.last_execution_result.result = None
    shell.events.register("post_run_cell", _forget_result)  # once: register() skips duplicates
    return True
