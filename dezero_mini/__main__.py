"""``python -m dezero_mini``: the command line of dezero_mini.cli."""
import sys

from dezero_mini.cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m dezero_mini"))
