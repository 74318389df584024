"""The command line of dezero_mini: ``python -m dezero_mini COMMAND``.

One module per command (``train``, ``memory``, ``graph``, ``leaks`` and its
PyTorch runner ``leaks_torch``, ``start``, ``check``, ``grade``,
``progress``), what their parsers share (``options``; the value types of
the options are ``dezero_mini.arguments``), how a command ends when stopped
(``guard``), and the program that puts them together (``program``).
"""
from dezero_mini.cli.program import build_parser, main  # noqa: F401
