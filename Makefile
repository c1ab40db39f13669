# Two commands do everything on a fresh machine with Python >= 3.10 and make:
#   make book   build the site (every notebook executed) into _build/html
#   make test   lint, unit tests, notebooks under nbval, stripped check, student edition,
#               site build and browser check
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed
NOTEBOOKS := $(sort $(wildcard chapters/*.ipynb))
# Strict mode: exercise checks raise instead of printing, so the book's own solutions
# are verified by every build and test run.
export ATTNLAB_STRICT := 1
export PYTHONHASHSEED := 0
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: help venv book test lint unit notebooks stripped student student-check \
        browser vendor bench clean

help:
	@echo "make book    build the website into _build/html (every notebook executed)"
	@echo "make test    run every test (lint, unit, notebooks, student edition, browser)"
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
	quiet $$pip "torch==2.13.0" \
	  || quiet $$pip "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu; \
	quiet $$pip -r requirements.txt; \
	quiet $$pip --no-deps -r requirements-nodeps.txt; \
	quiet $$pip --no-deps -e .; \
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null; \
	if $(PY) -m pip list 2>/dev/null | grep -qi '^nvidia-'; then \
	  echo "error: a CUDA build of torch was pulled in; see requirements.txt"; exit 1; fi; \
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
	@$(PY) tools/student.py chapters student >/dev/null  # the published student edition
	@start=$$(date +%s); \
	$(BIN)/jupyter-book build . --all --builder html -W -n --keep-going; \
	echo "book built in $$(( $$(date +%s) - start )) s -> _build/html/index.html"

# ---------------------------------------------------------------- tests
test: $(STAMP)
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory lint unit notebooks stripped student-check browser; \
	echo "make test: all passed in $$(( $$(date +%s) - start )) s"

lint: $(STAMP)
	$(BIN)/ruff check src tests tools bench chapters
	$(BIN)/ruff format --check src tests tools bench chapters

unit: $(STAMP)
	$(BIN)/pytest -q tests

# Every chapter notebook under nbval, one at a time; the budget plugin prints each
# notebook's time and fails any over ATTNLAB_NB_BUDGET seconds (default 90).
notebooks: $(STAMP)
	$(PY) -m pytest -q --nbval --nbval-current-env -p tools.nbbudget $(NOTEBOOKS)

stripped: $(STAMP)
	$(BIN)/nbstripout --verify $(NOTEBOOKS)

student: $(STAMP)
	$(PY) tools/student.py chapters _build/student

# The student edition keeps no solution and still runs from top to bottom: unfinished
# stubs make the checks print "not implemented yet" instead of aborting.
student-check: student
	$(PY) tools/student.py --verify _build/student
	ATTNLAB_STRICT=0 $(PY) -m pytest -q --nbval-lax --nbval-current-env \
	  _build/student/*.ipynb

browser: book
	$(PY) tools/browser_check.py _build/html _build/shots

# Grade a student's notebook: make grade NB=path/to/submission.ipynb [GRADE_ARGS=...]
.PHONY: grade
grade: $(STAMP)
	@if [ -z "$(NB)" ]; then echo "usage: make grade NB=submission.ipynb"; exit 2; fi
	$(PY) -m attnlab.grade $(NB) $(GRADE_ARGS)

bench: $(STAMP)
	@for f in bench/*.py; do [ -e "$$f" ] || continue; echo "== $$f"; $(PY) $$f; done

clean:
	rm -rf _build _vendor .jupyter_cache jupyter_execute
