#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image:
# install Graphviz (the course's package needs the Python bindings only, but
# `dot` keeps every command of the course working), bubblewrap (the sandbox
# that each submission runs in; util-linux's setpriv drops root's rights in it)
# and the course itself,
# from the checkout that `make gradescope-zip` puts in the zip as course/.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if command -v apt-get >/dev/null 2>&1; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    graphviz bubblewrap util-linux python3 python3-pip python3-venv
fi

# A regular install (not editable, not from a folder named dezero_mini beside
# a submission): the grader imports the installed copy only.
python3 -m pip install --upgrade pip || true
python3 -m pip install --break-system-packages "$HERE/course" 2>/dev/null \
  || python3 -m pip install "$HERE/course"

python3 -c "import dezero_mini.contracts.runner; print('dezero_mini installed for grading')"
# Say now, in the image's build log, whether the sandbox can run in this container.
python3 -c "from dezero_mini.contracts.bubblewrap import sandbox_problem as p; \
print('sandbox:', p() or 'bubblewrap runs')"
