# Two commands do everything on a fresh machine with Python >= 3.10 and make:
#   make book   build the site (every notebook executed) into _build/html
#   make test   every test: lint, unit tests (slow ones included), stripped check, the
#               site build (executes every master notebook once: the notebooks' test,
#               times printed, 90 s budget), the student edition under nbval, the
#               browser check. Independent stages run on two cores (make -j2).
#   make check  the quick inner loop: lint, unit tests without @pytest.mark.slow, stripped
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed
# Tests never write .pytest_cache into the book's tree (it breaks -W builds).
PYTEST := $(PY) -m pytest -p no:cacheprovider
# TORCH_VARIANT=cu126 (any download.pytorch.org/whl/ tag) installs that CUDA build on
# purpose; the default is the CPU build (tools/install_torch.sh).
TORCH_VARIANT ?= cpu
export TORCH_VARIANT
NOTEBOOKS := $(sort $(wildcard chapters/*.ipynb))
# Strict mode: exercise checks raise instead of printing, so the book's own solutions
# are verified by every build and test run.
export ATTNLAB_STRICT := 1
export PYTHONHASHSEED := 0
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: help venv book test check lint unit unit-quick notebooks stripped student \
        student-check browser browser-only vendor bench clean

help:
	@echo "make book    build the website into _build/html (every notebook executed)"
	@echo "make test    run every test (lint, unit, site build, student edition, browser)"
	@echo "make check   quick: lint, unit tests without the slow ones, stripped notebooks"
	@echo "make notebooks  the master notebooks under nbval, one at a time, with times"
	@echo "make student write the student edition (no solutions) to _build/student"
	@echo "make bench   run the benchmark scripts in bench/"
	@echo "make grade NB=file.ipynb  grade a student's notebook (attnlab.grade)"
	@echo "make clean   remove _build and caches (keeps .venv)"

# ---------------------------------------------------------------- environment
venv: $(STAMP)
$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml
	@start=$$(date +%s); \
	if [ ! -x $(PY) ]; then $(PYTHON) -m venv $(VENV); fi; \
	pip="$(PY) -m pip install -q --disable-pip-version-check"; \
	quiet() { "$$@" 2>&1 | sed '/is ignored: it is neither a file nor a directory/d'; }; \
	bash tools/install_torch.sh $(PY); \
	quiet $$pip -r requirements.txt; \
	quiet $$pip --no-deps -r requirements-nodeps.txt; \
	quiet $$pip --no-deps -e .; \
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null; \
	if [ "$(TORCH_VARIANT)" = cpu ] && $(PY) -m pip list 2>/dev/null | grep -qi '^nvidia-'; \
	then echo "error: a CUDA build of torch was pulled in (see tools/install_torch.sh;"; \
	  echo "       make venv TORCH_VARIANT=cu126 installs one on purpose)"; exit 1; fi; \
	touch $(STAMP); \
	echo "venv ready in $$(( $$(date +%s) - start )) s"

# ---------------------------------------------------------------- the site
# MathJax, require.js and the widget manager are vendored from the npm registry at build
# time (not committed) and served from the site itself, so pages work with no network.
vendor: _vendor/.done
_vendor/.done: tools/vendor_js.sh
	bash tools/vendor_js.sh _vendor
	touch $@

book: $(STAMP) vendor
	@# The published student edition (student/, committed: Colab opens it from the repository).
	@# `make test` passes STUDENT_REFRESH=0 so that tests/test_student.py, running beside
	@# the build, sees the committed files and fails when they are stale.
	@if [ "$(STUDENT_REFRESH)" != 0 ]; then $(PY) tools/student.py chapters student >/dev/null; fi
	@start=$$(date +%s); \
	$(BIN)/jupyter-book build . --all --builder html -W -n --keep-going; \
	echo "book built in $$(( $$(date +%s) - start )) s -> _build/html/index.html"

# ---------------------------------------------------------------- tests
# Each master notebook executes once per `make test`, in the site build (`-W` turns a
# failing cell into a failed build; tools/nbtimes.py prints the times and enforces the
# budget). The student edition runs under nbval. The two notebook passes and the unit
# tests are independent, so they share the two cores; the browser check needs the site.
# Two stages side by side on two cores: each runs torch on one thread. With two threads
# each, torch's OpenMP workers spin-wait for a core the other stage holds, and a notebook
# of tiny training steps was seen to take 13 CPU s in one run and 73 in the next.
TEST_STAGES := lint stripped book unit student-check
# Each stage's output in one piece (GNU make >= 4; macOS's make 3.81 interleaves).
SYNC := $(if $(filter output-sync,$(.FEATURES)),--output-sync=target)

test: $(STAMP)
	@start=$$(date +%s); \
	OMP_NUM_THREADS=1 $(MAKE) --no-print-directory -j2 $(SYNC) STUDENT_REFRESH=0 \
	  $(TEST_STAGES); \
	$(MAKE) --no-print-directory browser-only; \
	echo "make test: all passed in $$(( $$(date +%s) - start )) s"

check: lint unit-quick stripped

lint: $(STAMP)
	$(BIN)/ruff check src tests tools bench chapters
	$(BIN)/ruff format --check src tests tools bench chapters

unit: $(STAMP)
	@start=$$(date +%s); $(PYTEST) -q tests; \
	echo "unit tests: $$(( $$(date +%s) - start )) s"

unit-quick: $(STAMP)
	$(PYTEST) -q -m "not slow" tests

# Every master notebook under nbval, one at a time; the budget plugin prints each
# notebook's time and fails any over ATTNLAB_NB_BUDGET seconds (default 90). Not part
# of `make test` (the site build executes the same notebooks); for working on one:
#   make notebooks NOTEBOOKS=chapters/07_transformer.ipynb
notebooks: $(STAMP)
	$(PYTEST) -q --nbval --nbval-current-env -p tools.nbbudget $(NOTEBOOKS)

stripped: $(STAMP)
	$(BIN)/nbstripout --verify $(NOTEBOOKS)

student: $(STAMP)
	$(PY) tools/student.py chapters _build/student

# The student edition keeps no solution and still runs from top to bottom: unfinished
# stubs make the checks print "not implemented yet" instead of aborting.
student-check: student
	@start=$$(date +%s); \
	$(PY) tools/student.py --verify _build/student; \
	ATTNLAB_STRICT=0 $(PYTEST) -q --nbval-lax --nbval-current-env -p tools.nbbudget \
	  _build/student/*.ipynb; \
	echo "student edition: $$(( $$(date +%s) - start )) s"

browser: book browser-only

# Needs Chromium (README: Debian/Ubuntu `apt-get install chromium fonts-noto-color-emoji`);
# the check says so and stops if it is missing, and never installs anything itself.
browser-only:
	@start=$$(date +%s); \
	$(PY) tools/browser_check.py _build/html _build/shots; \
	echo "browser check: $$(( $$(date +%s) - start )) s"

# Grade a student's notebook: make grade NB=path/to/submission.ipynb [GRADE_ARGS=...]
.PHONY: grade
grade: $(STAMP)
	@if [ -z "$(NB)" ]; then echo "usage: make grade NB=submission.ipynb"; exit 2; fi
	$(PY) -m attnlab.grade $(NB) $(GRADE_ARGS)

bench: $(STAMP)
	@for f in bench/*.py; do [ -e "$$f" ] || continue; echo "== $$f"; $(PY) $$f; done

clean:
	rm -rf _build _vendor .jupyter_cache jupyter_execute
