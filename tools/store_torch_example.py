"""Store lesson 07's PyTorch example for readers without PyTorch.

    python tools/store_torch_example.py      (needs PyTorch: make test-torch installs it)

Runs :func:`dezero_mini.memory.torch_leaks.pytorch_example` and writes its
result, with today's date, to ``notebooks/stored/07_pytorch_leaks.json``
(through a temporary file and a rename). Lesson 07 runs the example itself
where PyTorch is installed, and shows this stored result, marked as such
with its date, where it is not.
"""
import datetime
import json
import sys
from pathlib import Path

from dezero_mini import atomic
from dezero_mini.memory.torch_leaks import pytorch_example

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "notebooks" / "stored" / "07_pytorch_leaks.json"


def main():
    try:
        result = pytorch_example(ROOT / "examples" / "pytorch")
    except ImportError:
        print("store_torch_example: PyTorch is not installed: make test-torch installs a CPU "
              "build", file=sys.stderr)
        return 2
    result["date"] = datetime.date.today().isoformat()
    atomic.write_text(STORED, json.dumps(result, indent=1) + "\n")
    print(f"wrote {STORED.relative_to(ROOT)}: PyTorch {result['torch']}, {result['date']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
