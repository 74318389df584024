"""One line that says where and when a figure was measured, for the scripts that print
figures (benchmarks/, tools/run_dezero_book.py): a reader on another machine compares
their run with it, and a figure quoted in the docs carries its context."""
import datetime
import os
import platform
import sys
from importlib import metadata


def _version(distribution):
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe(packages=("numpy", "torch")):
    """The date (UTC), the system, the cores and their load, Python and ``packages``' versions."""
    load = f", load {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    versions = ", ".join(f"{name} {_version(name)}" for name in packages)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"measured {now} on {platform.system()} {platform.machine()}, {os.cpu_count()} cores "
            f"({_cpu_name()}){load}; Python {sys.version.split()[0]}, {versions}")
