# dezero_mini: set up, test, and build the book.
#
#   make book        set up .venv with what the book needs, execute every notebook, build the site
#   make test        add the test tools to .venv, run the test suite in parallel (notebooks
#                    included, the built site opened in Chromium)
#   make test-quick  the tests without the notebooks, the site, the long measurements and the real signals
#   make test-deep   the long runs: every notebook again, hypothesis' deep profile, the soak
#   make lab         set up .venv with JupyterLab, register its kernel, open notebooks/
#   make lite        build the in-browser preview (JupyterLite, in .venv-lite) into build/lite
#
# Another interpreter:  PYTHON=python3.12 make book   (used when .venv is created;
# run `make distclean` first to rebuild an existing .venv with it).

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
# The extras of pyproject.toml that each command installs: the book's, then the tests' on top.
BOOK_EXTRAS := book,data,tools
TEST_EXTRAS := $(BOOK_EXTRAS),widgets,test
# Touched after a successful install of each set; pip runs again only when pyproject.toml or setup.py (the .pth guard of dezero_mini/shadowing.py) is newer.
BOOK_STAMP := $(VENV)/.installed-book
TEST_STAMP := $(VENV)/.installed-test
LAB_STAMP  := $(VENV)/.installed-lab
PYTEST_ARGS ?=
# Test processes (pytest-xdist): auto is one per core. Tests that share an expensive
# record are kept in one process (xdist_group marks, --dist loadgroup), and the work is
# handed out in the order tests/conftest.py gives it (long units first; FIRST there).
JOBS ?= auto
PARALLEL = -n $(JOBS) --dist loadgroup --no-loadscope-reorder
# Batches of the soak run of `make test-deep` (benchmarks/soak.py).
SOAK_BATCHES ?= 10000

.DEFAULT_GOAL := help
.PHONY: help venv dot chromium bwrap book test test-quick test-deep lab lite test-pythons notebooks gradescope-zip student-edition test-graders test-torch clean distclean

help:
	@echo "make book        set up .venv with the book's tools, execute the notebooks, build the book (build/book/html)"
	@echo "make test        add the test tools to .venv, run the tests in parallel, notebooks included"
	@echo "                 (PYTEST_ARGS=... to pass options, JOBS=1 for one process)"
	@echo "make test-quick  the tests without the notebooks, the site, the long measurements and the real signals"
	@echo "make test-deep   every notebook run again, hypothesis' deep profile (10x the examples),"
	@echo "                 the soak of benchmarks/soak.py; tests/test_vs_torch.py runs when PyTorch is installed"
	@echo "make lab         set up .venv with JupyterLab (and ipywidgets, memray, objgraph), open notebooks/"
	@echo "make lite        build the in-browser preview (JupyterLite) into build/lite; the book's pages link it"
	@echo "make test-pythons  run the notebook and contract tests on every supported Python found (.venvs/)"
	@echo "make notebooks   execute every notebook and report how long each took"
	@echo "make student-edition UPTO=N   the course up to stage N for a lab's students (build/student-edition-NN)"
	@echo "make test-graders  install nbgrader, Otter-Grader and repo2docker into .venv and test the lab recipes"
	@echo "make test-torch  install PyTorch (a CPU build) into .venv and run the tests that need it"
	@echo "make venv        only create/update the virtual environment .venv"
	@echo "make dot         only check for Graphviz's 'dot' (installing it where possible)"
	@echo "make chromium    only check for Chromium and chromedriver, which the site test opens the book in (installing them where possible)"
	@echo "make bwrap       only check for bubblewrap, the checker's sandbox (installing it where possible)"
	@echo "make gradescope-zip STAGE=N [WEIGHTS=file]  the autograder zip of stage N for Gradescope (build/gradescope)"
	@echo "make clean       remove build/"
	@echo "make distclean   remove build/ and .venv/"
	@echo "Python used for .venv: PYTHON=$(PYTHON) (3.10 or newer)"

venv: $(TEST_STAMP)

# The virtual environment itself. Only reached when .venv/bin/python is missing
# (or a dangling link), so a half-made .venv is removed and made again.
$(VPY):
	@command -v "$(PYTHON)" >/dev/null 2>&1 || { \
	  echo "make: no '$(PYTHON)' on PATH. Install Python 3.10 or newer, or name one: PYTHON=python3.12 make ..." >&2; \
	  exit 1; }
	@"$(PYTHON)" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { \
	  echo "make: $(PYTHON) is Python $$("$(PYTHON)" -c 'import platform; print(platform.python_version())'), but dezero_mini needs Python 3.10 or newer." >&2; \
	  echo "      Install a newer one and name it, e.g.:  PYTHON=python3.12 make $(MAKECMDGOALS)" >&2; \
	  exit 1; }
	@rm -rf "$(VENV)"
	@echo "Creating $(VENV) with $$(command -v "$(PYTHON)") (Python $$("$(PYTHON)" -c 'import platform; print(platform.python_version())'))"
	@"$(PYTHON)" -m venv "$(VENV)" || { \
	  rm -rf "$(VENV)"; \
	  echo "make: '$(PYTHON) -m venv' failed. On Debian/Ubuntu the venv module is a separate package:" >&2; \
	  echo "      sudo apt-get install python3-venv" >&2; \
	  exit 1; }

$(BOOK_STAMP): pyproject.toml setup.py | $(VPY)
	@$(VPY) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { \
	  echo "make: $(VENV) runs a Python older than 3.10. Remove it (make distclean) and run make again." >&2; \
	  exit 1; }
	@echo "Installing dezero_mini (editable) with what the book needs into $(VENV): [$(BOOK_EXTRAS)]"
	$(VPY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(VPY) -m pip install --disable-pip-version-check --editable ".[$(BOOK_EXTRAS)]"
	@touch "$(BOOK_STAMP)"

$(TEST_STAMP): pyproject.toml setup.py $(BOOK_STAMP)
	@echo "Adding the test tools to $(VENV): [$(TEST_EXTRAS)]"
	$(VPY) -m pip install --disable-pip-version-check --editable ".[$(TEST_EXTRAS)]"
	@touch "$(TEST_STAMP)"

# Graphviz's `dot` program renders the reference graphs; it comes from the system.
# Installed here when that needs no questions (root with apt-get); otherwise
# make stops and names the one command to run.
dot:
	@if command -v dot >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(uname -s)" = Darwin ]; then \
	  echo "make: Graphviz's 'dot' program is missing. Install it, then run make again:" >&2; \
	  echo "      brew install graphviz" >&2; \
	  exit 1; \
	fi; \
	if command -v apt-get >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "Graphviz's 'dot' program is missing: installing the graphviz package with apt-get"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -q || echo "make: apt-get update failed; trying the install anyway" >&2; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q graphviz || { \
	      echo "make: apt-get could not install graphviz (see above)." >&2; exit 1; }; \
	    command -v dot >/dev/null 2>&1 || { \
	      echo "make: graphviz is installed but 'dot' is still not on PATH ($$PATH)." >&2; exit 1; }; \
	    exit 0; \
	  fi; \
	  echo "make: Graphviz's 'dot' program is missing. Install it, then run make again:" >&2; \
	  echo "      sudo apt-get install graphviz" >&2; \
	  exit 1; \
	fi; \
	echo "make: Graphviz's 'dot' program is missing. Install the 'graphviz' package with your" >&2; \
	echo "      system's package manager (e.g. sudo dnf install graphviz), then run make again." >&2; \
	exit 1

# Chromium and its chromedriver: tests/test_site.py opens every page of the built book
# in them (driven by Selenium: tools/site_browser.py). Installed here when that needs no
# questions (root with apt-get); where they cannot be, make goes on and the browser
# checks are skipped with one line that says why.
CHROMIUM_NAMES := chromium chromium-browser google-chrome google-chrome-stable
chromium:
	@browser=; for name in $(CHROMIUM_NAMES); do command -v $$name >/dev/null 2>&1 && browser=$$name && break; done; \
	[ -n "$$DEZERO_MINI_CHROMIUM" ] && browser=$$DEZERO_MINI_CHROMIUM; \
	driver=$$(command -v chromedriver || ls /usr/lib/chromium/chromedriver 2>/dev/null); \
	[ -n "$$DEZERO_MINI_CHROMEDRIVER" ] && driver=$$DEZERO_MINI_CHROMEDRIVER; \
	if [ -n "$$browser" ] && [ -n "$$driver" ]; then exit 0; fi; \
	if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "Chromium or chromedriver is missing: installing chromium and chromium-driver with apt-get (for the site test)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -q || echo "make: apt-get update failed; trying the install anyway" >&2; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver || \
	    echo "make: apt-get could not install chromium chromium-driver; the site test will skip its browser checks" >&2; \
	  exit 0; \
	fi; \
	echo "make: no Chromium with chromedriver, so the site test will skip its browser checks. To run them:" >&2; \
	echo "      sudo apt-get install chromium chromium-driver   (or set DEZERO_MINI_CHROMIUM and DEZERO_MINI_CHROMEDRIVER)" >&2

# bubblewrap (bwrap): `check`, `grade` and the Gradescope autograder run each submission
# in its sandbox (docs/classroom.md says what it isolates). Installed here when that
# needs no questions (root with apt-get); where it cannot be, make goes on: `check`
# then says in one line that it runs without it, `grade` refuses until it is there
# (or is told --sandbox auto), and the sandbox's tests are skipped with the reason.
bwrap:
	@if [ "$$(uname -s)" != Linux ] || command -v bwrap >/dev/null 2>&1; then exit 0; fi; \
	if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "bubblewrap is missing: installing the bubblewrap package with apt-get (the checker's sandbox)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -q || echo "make: apt-get update failed; trying the install anyway" >&2; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap || \
	    echo "make: apt-get could not install bubblewrap; check runs submissions without its sandbox" >&2; \
	  exit 0; \
	fi; \
	echo "make: no bubblewrap, so check runs submissions without its sandbox and grade refuses. To have it:" >&2; \
	echo "      sudo apt-get install bubblewrap   (sudo dnf install bubblewrap on Fedora)" >&2

# Each notebook's run is kept in build/executed/ and reused, after checks, by the
# other command (tools/notebook_cache.py): `make test` then `make book` runs each once.
book: dot $(BOOK_STAMP)
	$(VPY) tools/build_book.py

test: dot chromium bwrap $(TEST_STAMP)
	$(VPY) -m pytest $(PARALLEL) $(PYTEST_ARGS)

# The edit-test loop: no notebook, no browser, no whole-training measurement, no
# command stopped by a real signal (the tests marked slow; conftest.SLOW names them).
test-quick: $(TEST_STAMP)
	$(VPY) -m pytest $(PARALLEL) -m "not slow" $(PYTEST_ARGS)

# The long runs: every notebook executed again (no kept run reused), the property
# tests with 10 times their examples, then the soak. The differential test against
# PyTorch is part of the suite and runs when PyTorch is installed in .venv.
test-deep: dot chromium bwrap $(TEST_STAMP)
	DEZERO_MINI_FRESH_NOTEBOOKS=1 $(VPY) -m pytest $(PARALLEL) --hypothesis-profile=deep $(PYTEST_ARGS)
	$(VPY) benchmarks/soak.py --batches $(SOAK_BATCHES)

# JupyterLab in .venv. The kernel is registered in .venv under the name the notebooks
# are stored with (python3), so the lab runs them on .venv's Python, in their folder,
# as `make book` does.
$(LAB_STAMP): $(BOOK_STAMP)
	$(VPY) -m pip install --disable-pip-version-check --editable ".[$(BOOK_EXTRAS),widgets,lab]"
	$(VPY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (dezero_mini .venv)"
	@touch "$(LAB_STAMP)"

# Jupyter refuses to start as root unless told to (a container, a lab machine's admin
# account): pass --allow-root there, and only there. answer_yes: one Ctrl-C stops the
# server (by default it asks "Shut down this Jupyter server?" and needs a second one).
lab: dot $(LAB_STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.answer_yes=True $$([ "$$(id -u)" = 0 ] && echo --allow-root) notebooks/

# The in-browser preview: a JupyterLite site with the notebooks, the step files and the
# course's wheel, whose Pyodide kernel, NumPy and Matplotlib come from Pyodide's CDN when
# a reader opens it (tools/build_lite.py). Its tools live in a venv of their own, pinned:
# they are needed only here. Before or after `make book`: the lesson pages get its button
# either way.
LITE_VENV  := .venv-lite
LITE_STAMP := $(LITE_VENV)/.installed-lite
LITE_TOOLS := "jupyterlite-core[contents]==0.8.6" "jupyterlite-pyodide-kernel==0.8.6"

$(LITE_STAMP):
	@rm -rf "$(LITE_VENV)"
	"$(PYTHON)" -m venv "$(LITE_VENV)"
	$(LITE_VENV)/bin/python -m pip install --disable-pip-version-check $(LITE_TOOLS)
	@touch "$(LITE_STAMP)"

lite: $(LITE_STAMP)
	$(LITE_VENV)/bin/python tools/build_lite.py

# Every Python from pyproject's requires-python up to the newest on PATH or in
# pyenv, each in its own .venvs/py3.X; prints a table. CPU-heavy: minutes per Python.
test-pythons: dot
	"$(PYTHON)" tools/test_pythons.py $(if $(PYTEST_ARGS),-- $(PYTEST_ARGS))

notebooks: dot $(BOOK_STAMP)
	$(VPY) tools/run_notebooks.py

# The zip for Gradescope's autograder: graders/gradescope/ and the course (see its README).
gradescope-zip: bwrap $(BOOK_STAMP)
	@test -n "$(STAGE)" || { echo "make gradescope-zip: give the stage, e.g. make gradescope-zip STAGE=3" >&2; exit 2; }
	$(VPY) tools/gradescope_zip.py --stage "$(STAGE)" $(if $(WEIGHTS),--weights "$(WEIGHTS)")

# The course for a class that has finished stage UPTO: no step file, lesson or
# solution of a later stage (tools/student_edition.py says what it holds).
UPTO ?=
student-edition: $(BOOK_STAMP)
	@[ -n "$(UPTO)" ] || { echo "make: give the last stage the class has finished: make student-edition UPTO=3" >&2; exit 2; }
	$(VPY) tools/student_edition.py "$(UPTO)" $(if $(OUT),"$(OUT)")

# The lab chapter's recipes run with the real graders (tests/test_graders.py skips
# each recipe whose grader is not installed; this target installs them all).
GRADERS_STAMP := $(VENV)/.installed-graders
$(GRADERS_STAMP): $(TEST_STAMP)
	$(VPY) -m pip install --disable-pip-version-check --editable ".[$(TEST_EXTRAS),graders]"
	@touch "$(GRADERS_STAMP)"

test-graders: dot $(GRADERS_STAMP)
	$(VPY) -m pytest tests/test_graders.py $(PYTEST_ARGS)
# PyTorch for the tests that need it (the leak finder on PyTorch scripts, the differential
# test), a CPU build where one can be had, tried in this order:
#  1. from the package index pip is set up with (PyPI, and any wheel house or mirror of
#     its configuration): torch==$(TORCH_VERSION)+cpu on Linux x86-64 (a CPU build, about
#     200 MB, found where a mirror or local wheel house has it), plain torch==$(TORCH_VERSION)
#     elsewhere, where PyPI's wheel is the CPU build (macOS, Windows, Linux aarch64);
#  2. on Linux x86-64, from PyTorch's own CPU index (TORCH_CPU_INDEX), given 15 s to answer;
#  3. PyPI's torch==$(TORCH_VERSION): on Linux x86-64 the CUDA build, with its nvidia-*
#     packages (several GB; it runs on a CPU too). Said before it starts.
# Elsewhere: make test-torch TORCH_PIP_ARGS="--index-url URL" (used for every attempt).
TORCH_VERSION ?= 2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_PIP_ARGS ?=
TORCH_PIP := $(VPY) -m pip install --disable-pip-version-check $(TORCH_PIP_ARGS)
test-torch: $(TEST_STAMP)
	@$(VPY) -c 'import torch' 2>/dev/null || { \
	  if [ "$$(uname -s)-$$(uname -m)" = "Linux-x86_64" ]; then \
	    $(TORCH_PIP) "torch==$(TORCH_VERSION)+cpu" || \
	    $(TORCH_PIP) --timeout 15 --retries 0 --index-url "$(TORCH_CPU_INDEX)" \
	      --extra-index-url https://pypi.org/simple "torch==$(TORCH_VERSION)+cpu" || { \
	      echo "make: no CPU build of torch $(TORCH_VERSION) could be had; installing PyPI's (the CUDA build: several GB)"; \
	      $(TORCH_PIP) "torch==$(TORCH_VERSION)"; }; \
	  else $(TORCH_PIP) "torch==$(TORCH_VERSION)"; fi; }
	$(VPY) -m pytest tests/test_torch_leaks.py tests/test_torch_leak_suite.py tests/test_vs_torch.py $(PYTEST_ARGS)

clean:
	rm -rf build

distclean: clean
	rm -rf "$(VENV)" "$(LITE_VENV)"
