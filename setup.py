"""The one part of the build that pyproject.toml cannot say: a ``.pth`` file in
``site-packages``, whose line stops ``python -m dezero_mini`` from running a
learner's ``dezero_mini.py`` of the current folder in place of the package
(dezero_mini/shadowing.py says how, and what it cannot cover).

A wheel gets it at its root (``build_py``); an editable install (``pip
install -e``, what ``make venv`` does) gets it in its wheel beside the
editable finder. Everything else is in pyproject.toml.
"""
import runpy
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SOURCE = Path(__file__).resolve().parent / "dezero_mini" / "shadowing.py"
GUARD = runpy.run_path(str(SOURCE))


def write_pth(folder, guard):
    """Write the guard's ``.pth`` file into ``folder`` (a wheel's root), its
    line running the file at ``guard`` (a Python expression)."""
    path = Path(folder) / GUARD["PTH_NAME"]
    path.write_text(GUARD["PTH_LINE"].format(guard=guard) + "\n", encoding="utf-8")
    return str(path)


class BuildWithGuard(build_py):
    """build_py, and the guard's ``.pth`` at the root of the wheel."""

    def run(self):
        super().run()
        if not getattr(self, "editable_mode", False):
            self.mkpath(self.build_lib)
            write_pth(self.build_lib, GUARD["GUARD_IN_WHEEL"])

    def get_outputs(self, *args, **kwargs):
        outputs = super().get_outputs(*args, **kwargs)
        if getattr(self, "editable_mode", False):
            return outputs
        return [*outputs, str(Path(self.build_lib) / GUARD["PTH_NAME"])]


commands = {"build_py": BuildWithGuard}
try:
    from setuptools.command.editable_wheel import editable_wheel

    class EditableWithGuard(editable_wheel):
        """The editable wheel, with the guard's ``.pth`` beside the finder:
        the folder this adds to the wheel is written into it whole
        (``write_files(unpacked_wheel)``), as the ``.dist-info`` is."""

        def _run_build_commands(self, dist_name, unpacked_wheel, build_lib, tmp_dir):
            found = super()._run_build_commands(dist_name, unpacked_wheel, build_lib, tmp_dir)
            write_pth(unpacked_wheel, repr(str(SOURCE)))
            return found

    commands["editable_wheel"] = EditableWithGuard
except ImportError:  # a setuptools without PEP 660 editable installs
    pass

setup(cmdclass=commands)
