# Two commands do everything on a fresh machine with Python >= 3.11 and make:
#   make book   build the site (every notebook executed) into _build/html
#   make test   every test: lint, unit tests (slow ones included), stripped check, the
#               site build (executes every master notebook once: the notebooks' test,
#               times printed, 90 s budget), the student edition under nbval, the
#               browser check. Independent stages run on two cores (make -j2).
#   make check  the quick inner loop: lint (ruff; mypy over the library), unit tests
#               without @pytest.mark.slow, notebooks stored stripped
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed
# The oldest Python the pinned requirements install on (the check before `make venv`).
PYTHON_MIN := 3.11
comma := ,
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
# torch on one thread everywhere (the site build too): the chapters' models are tiny, a
# second thread only spin-waits, and CPU budgets are measured on one thread
export OMP_NUM_THREADS ?= 1
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: help venv book test check lint unit unit-quick notebooks stripped student \
        student-check browser browser-only vendor bench clean editions colab colab-check \
        workflow preflight portability portability-scalar portability-next torch-next \
        portability-seeds portability-avx2 \
        py310 student-verify browser-perf browser-after-book book-graded

help:
	@echo "make book    build the website into _build/html (every notebook executed)"
	@echo "make test    run every test (lint, unit, site build, student edition, browser)"
	@echo "make check   quick: lint, unit tests without the slow ones, stripped notebooks"
	@echo "make notebooks  the master notebooks under nbval, one at a time, with times"
	@echo "make student write the student edition (no solutions) to _build/student"
	@echo "make book-graded  the website without solutions (a graded term)"
	@echo "make editions  refresh glue-snapshot.json (from the last book run) and the"
	@echo "             notebook editions student/ and full/ (make book does it too)"
	@echo "make colab-check  every chapter's student edition in a Colab stand-in"
	@echo "make browser-perf  the built site on a throttled phone: first paint, long tasks"
	@echo "make venv    create .venv with the pinned requirements (make book/test do it)"
	@echo "make bench   run the benchmark scripts in bench/"
	@echo "make grade NB=file.ipynb  grade a student's notebook (attnlab.grade)"
	@echo "make clean   remove _build and caches (keeps .venv)"

# ---------------------------------------------------------------- environment
venv: $(STAMP)
$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml
	@start=$$(date +%s); \
	if [ ! -x $(PY) ]; then \
	  if ! $(PYTHON) -c 'import sys; sys.exit(sys.version_info < ($(subst .,$(comma) ,$(PYTHON_MIN))))' 2>/dev/null; then \
	    echo "error: make book and make test need Python >= $(PYTHON_MIN) (numpy 2.4.6, scipy 1.17.1"; \
	    echo "       and other pinned requirements do); $(PYTHON) is $$($(PYTHON) --version 2>&1)."; \
	    echo "       Run with another one: make test PYTHON=python3.12"; exit 1; fi; \
	  $(PYTHON) -m venv $(VENV); fi; \
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

# The notebook editions (student/, full/: committed, Colab opens them from the
# repository) quote the values this build glued: after executing, the build refreshes
# glue-snapshot.json and the editions (`make editions`) and copies them into the site.
# `make test` passes EDITIONS_REFRESH=0 so that tests/test_editions.py, running beside
# the build, sees the committed files and fails when they are stale.
book: $(STAMP) vendor
	@start=$$(date +%s); \
	$(BIN)/jupyter-book build . --all --builder html -W -n --keep-going; \
	echo "book built in $$(( $$(date +%s) - start )) s -> _build/html/index.html"
	@if [ "$(EDITIONS_REFRESH)" != 0 ]; then $(MAKE) --no-print-directory editions; \
	  $(PY) tools/editions.py publish _build/html; fi

# The website without the solutions, for a term whose exercises are graded: every
# solution dropdown (and the cells in it) and the master notebooks' downloads leave the
# pages (tools/site_solutions.py); the notebooks still execute with their solutions.
# Into _build/graded/_build/html (its own caches: the public site is left alone).
book-graded: $(STAMP) vendor
	@start=$$(date +%s); \
	ATTNLAB_SITE_SOLUTIONS=0 $(BIN)/jupyter-book build . --all --builder html -W -n \
	  --keep-going --path-output _build/graded; \
	echo "graded site built in $$(( $$(date +%s) - start )) s -> _build/graded/_build/html"

# Refresh glue-snapshot.json from the last site build's executed chapters (if there is
# one) and rewrite student/ and full/ from chapters/ + the snapshot + _config.yml, then
# the grader's answer key (grader/src/attnlab_grade/masters.json) from the masters and the
# student edition. One command for a new repository URL too: edit _config.yml, run
# `make editions`.
editions: $(STAMP)
	@if [ -d _build/jupyter_execute/chapters ]; then \
	  $(PY) tools/editions.py write --snapshot-from _build/jupyter_execute; \
	else $(PY) tools/editions.py write; fi
	@$(PY) -m attnlab.grade.build_masters chapters student

# ---------------------------------------------------------------- tests
# Each master notebook executes once per `make test`, in the site build (`-W` turns a
# failing cell into a failed build; tools/nbtimes.py prints the times and enforces the
# budget). The stages are independent but for the browser check, which needs the site:
# they share the two cores.
# Two stages side by side on two cores: each runs torch on one thread. With two threads
# each, torch's OpenMP workers spin-wait for a core the other stage holds, and a notebook
# of tiny training steps was seen to take 13 CPU s in one run and 73 in the next.
# In this order the two lanes come out about even: the site build then the browser
# check on one core, lint, the static student check and the unit tests on the other,
# then the Colab stand-in on whichever frees first.
# Executing every chapter's student edition is a job of its own (make student-check and
# make colab-check, the workflow's `editions` job): make test executes each master once
# (the site build) and the student editions of COLAB_CHAPTERS (the Colab stand-in).
# The browser check needs the built site only: it starts as soon as the site build
# ends, beside whatever unit tests are left, instead of after everything.
TEST_STAGES := book lint stripped workflow student-verify unit browser-after-book colab
# Each stage's output in one piece (GNU make >= 4; macOS's make 3.81 interleaves).
comma := ,
SYNC := $(if $(filter output-sync,$(.FEATURES)),--output-sync=target)

# The site build is the longest stage and the browser check waits for it, so it starts
# first: its one prerequisite left (the vendored JavaScript) is made before the two
# lanes open, and `book` is the first goal, so make gives it the first slot. (With the
# vendoring inside the parallel phase, make handed both slots to later goals and the
# build started 11 minutes late.)
test: $(STAMP) preflight
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory vendor; \
	OMP_NUM_THREADS=1 $(MAKE) --no-print-directory -j2 $(SYNC) EDITIONS_REFRESH=0 \
	  $(TEST_STAGES); \
	echo "make test: all passed in $$(( $$(date +%s) - start )) s"

browser-after-book: book
	@$(MAKE) --no-print-directory browser-only

# What the last stage needs, checked first: no waiting minutes to learn it is missing.
preflight: $(STAMP)
	@$(PY) -c 'from tools.browser_check import find_chromium; find_chromium()'
	@command -v git >/dev/null || { echo "error: make test needs git (the Colab stand-in)"; exit 1; }

check: lint unit-quick stripped

lint: $(STAMP)
	$(BIN)/ruff check src grader tests tools bench chapters
	$(BIN)/ruff format --check src grader tests tools bench chapters
	PYTHONPATH=src:. $(BIN)/lint-imports --no-logo
	@start=$$(date +%s); $(PY) -m mypy; \
	echo "mypy (the library, [tool.mypy] in pyproject.toml): $$(( $$(date +%s) - start )) s"

# The re-runs of committed experiments (@pytest.mark.experiment) compare conclusions
# across machines: make portability runs them, under other kernels and another torch.
unit: $(STAMP)
	@start=$$(date +%s); $(PYTEST) -q -m "not experiment" tests; \
	echo "unit tests: $$(( $$(date +%s) - start )) s"

unit-quick: $(STAMP)
	$(PYTEST) -q -m "not slow" tests

# Every master notebook under nbval, one at a time; the budget plugin prints each
# notebook's time and fails any over ATTNLAB_NB_BUDGET seconds (default 90). Not part
# of `make test` (the site build executes the same notebooks); for working on one:
#   make notebooks NOTEBOOKS=chapters/07a_transformer.ipynb
notebooks: $(STAMP)
	$(PYTEST) -q --nbval --nbval-current-env -p tools.nbbudget $(NOTEBOOKS)

stripped: $(STAMP)
	$(BIN)/nbstripout --verify $(NOTEBOOKS)

student: $(STAMP)
	$(PY) tools/student.py chapters _build/student

# The student edition keeps no solution and still runs from top to bottom: unfinished
# stubs make the checks print "not implemented yet" instead of aborting.
# Chapters the Colab stand-in runs in `make test` (stage `colab`): their student
# edition runs there, top to bottom, so this stage leaves them out.
COLAB_CHAPTERS := 01 10 11
student-check: student
	@start=$$(date +%s); \
	$(PY) tools/student.py --verify _build/student; \
	ATTNLAB_STRICT=0 $(PYTEST) -q --nbval-lax --nbval-current-env -p tools.nbbudget \
	  $(filter-out $(foreach n,$(COLAB_CHAPTERS),_build/student/$(n)_%), \
	    $(patsubst chapters/%,_build/student/%,$(NOTEBOOKS))); \
	echo "student edition: $$(( $$(date +%s) - start )) s"

# No solution left and no MyST markup in any chapter's student edition (seconds): the
# static half of student-check, in make test.
student-verify: student
	@$(PY) tools/student.py --verify _build/student

browser: book browser-only

# The GitHub workflow (.github/workflows/) against the GitHub-workflow JSON schema that
# check-jsonschema ships (no network).
workflow: $(STAMP)
	$(BIN)/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml

# The student edition in a Colab stand-in (tools/colab_standin.py): a venv with Colab's
# package versions, google.colab imported at kernel start, attnlab installed by the
# setup cell from this checkout (git+file://, its last commit). `make test` runs
# chapters 1, 10 and 11; `make colab-check` runs them all.
colab: $(STAMP)
	@$(PY) tools/colab_standin.py --chapters $(subst $(eval) ,$(comma),$(COLAB_CHAPTERS))

colab-check: $(STAMP)
	@$(PY) tools/colab_standin.py --all

# ---------------------------------------------------------------- portability
# Training is not bitwise portable (CONTRIBUTING.md, "Results that travel"): every
# chapter must run top to bottom, and its prose stay true, on other machines. What
# another machine changes is the training trajectory; on this machine the honest
# stand-ins are other seeds and other kernels. Lanes, two at a time on two cores:
#   seeds   every master notebook under ATTNLAB_SEED=1 and =2 (SEED_SHIFTS): every
#           live-training seed s becomes s + 1000 k (attnlab.seeding), so each chapter
#           trains other models on other batches; every claim it asserts must hold;
#   scalar  every master notebook under PyTorch's scalar kernels
#           (ATEN_CPU_CAPABILITY=default: other rounding), then the re-runs of committed
#           experiments (@pytest.mark.experiment) under the same kernels;
#   avx2    where the CPU has AVX-512: every master notebook under
#           ATEN_CPU_CAPABILITY=avx2, the kernels an AVX2 machine runs (on an AVX2
#           machine the plain run is that lane: it says so and passes);
#   next    every master notebook under the newest PyTorch, in its own environment
#           under _build/torch-next (TORCH_NEXT; on Linux x86-64 PyPI's wheel is the
#           CUDA build, several GB, downloaded once and cached by pip), and the
#           experiment re-runs there too.
# The CPU budget is load-corrected (tools/kernel_cpu.py) in every lane; scalar kernels
# are slower, so that lane allows 180 s a chapter.
TORCH_NEXT ?= 2.15.0
NEXT := _build/torch-next
SEED_SHIFTS ?= 1 2
NBVAL := $(PYTEST) -q --nbval --nbval-current-env -p tools.nbbudget
portability: $(STAMP)
	@start=$$(date +%s); \
	OMP_NUM_THREADS=1 $(MAKE) --no-print-directory -j2 $(SYNC) portability-seeds \
	  portability-scalar portability-avx2 portability-next; \
	echo "make portability: all passed in $$(( $$(date +%s) - start )) s"

portability-seeds: $(STAMP)
	@start=$$(date +%s); \
	for k in $(SEED_SHIFTS); do \
	  echo "== ATTNLAB_SEED=$$k"; ATTNLAB_SEED=$$k $(NBVAL) $(NOTEBOOKS); done; \
	echo "seed shifts $(SEED_SHIFTS): $$(( $$(date +%s) - start )) s"

portability-scalar: $(STAMP)
	@start=$$(date +%s); \
	ATEN_CPU_CAPABILITY=default ATTNLAB_NB_BUDGET=180 $(NBVAL) $(NOTEBOOKS); \
	ATEN_CPU_CAPABILITY=default $(PYTEST) -q -m experiment tests; \
	echo "scalar kernels: $$(( $$(date +%s) - start )) s"

portability-avx2: $(STAMP)
	@start=$$(date +%s); \
	if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then \
	  ATEN_CPU_CAPABILITY=avx2 $(NBVAL) $(NOTEBOOKS); \
	  echo "AVX2 kernels on an AVX-512 CPU: $$(( $$(date +%s) - start )) s"; \
	else echo "avx2 lane: this CPU has no AVX-512, so make test already ran the AVX2 kernels"; fi

portability-next: torch-next
	@start=$$(date +%s); \
	$(NEXT)/bin/python -c 'import torch; print("second torch:", torch.__version__)'; \
	$(NEXT)/bin/python -m pytest -p no:cacheprovider -q --nbval --nbval-current-env \
	  -p tools.nbbudget $(NOTEBOOKS); \
	$(NEXT)/bin/python -m pytest -p no:cacheprovider -q -m experiment tests; \
	echo "torch $(TORCH_NEXT): $$(( $$(date +%s) - start )) s"

torch-next: $(NEXT)/.installed
$(NEXT)/.installed: requirements.txt requirements-nodeps.txt pyproject.toml
	@start=$$(date +%s); \
	[ -x $(NEXT)/bin/python ] || $(PYTHON) -m venv $(NEXT); \
	pip="$(NEXT)/bin/python -m pip install -q --disable-pip-version-check"; \
	PIP_CONSTRAINT=/dev/null $$pip "torch==$(TORCH_NEXT)"; \
	grep -v -e '^torch==' -e '^triton==' requirements.txt > $(NEXT)/requirements.txt; \
	PIP_CONSTRAINT=/dev/null $$pip -r $(NEXT)/requirements.txt "torch==$(TORCH_NEXT)"; \
	$$pip --no-deps -r requirements-nodeps.txt; \
	$$pip --no-deps -e .; \
	$(NEXT)/bin/python -m ipykernel install --sys-prefix --name python3 >/dev/null; \
	touch $@; echo "torch $(TORCH_NEXT) environment ready in $$(( $$(date +%s) - start )) s"

# The package's floor (requires-python in pyproject.toml): its unit tests on Python
# 3.10, in _build/py310, with the package's own dependency *ranges* (the pins of the
# book's build need 3.11). PY310=/path/to/python3.10 picks the interpreter.
PY310 ?= python3.10
# Every unit test but those of the book's own tooling (site, editions, grader, browser),
# which runs on the pinned 3.11 environment only.
PY310_TESTS := $(filter-out $(addprefix tests/,test_book.py test_editions.py \
  test_exercise_numbers.py test_grade.py test_grade_redteam.py test_grade_replay.py \
  test_instructors.py test_kernel_cpu.py test_notebook.py test_site_polish.py \
  test_student.py test_twins_live.py test_widgets_twin.py test_widgets_twin_explanation.py \
  test_widgets_twin_more.py test_zmq_poll.py test_workflow.py test_bad_inputs.py), \
  $(wildcard tests/test_*.py))
py310:
	@start=$$(date +%s); \
	[ -x _build/py310/bin/python ] || $(PY310) -m venv _build/py310; \
	pip="_build/py310/bin/python -m pip install -q --disable-pip-version-check"; \
	bash tools/install_torch.sh _build/py310/bin/python 2>/dev/null \
	  || { echo "py310: no CPU wheel of torch for this Python here; PyPI's build instead"; \
	       $$pip "torch==$$(sed -n 's/^torch==//p' requirements.txt)"; }; \
	$$pip -e ".[test,pretrained]" pytest hypothesis; \
	$$pip --no-deps -r requirements-nodeps.txt; \
	_build/py310/bin/python -m pytest -p no:cacheprovider -q -m "not slow" \
	  $(PY310_TESTS); \
	echo "python 3.10: $$(( $$(date +%s) - start )) s"

# Needs Chromium (README: Debian/Ubuntu `apt-get install chromium fonts-noto-color-emoji`);
# the check says so and stops if it is missing, and never installs anything itself.
# First, in seconds and without a browser: the site is the polished one
# (tools/site_audit.py: no MathJax runtime, no Font Awesome, the search index on the
# search page only, one <h1>, no embedded widget on any page).
browser-only:
	@start=$$(date +%s); \
	$(PY) tools/site_audit.py _build/html; \
	$(PY) tools/browser_check.py _build/html _build/shots; \
	echo "browser check: $$(( $$(date +%s) - start )) s"

# The built site loaded as a mid-range phone would (tools/browser_perf.py): 4x CPU,
# 9 Mbit/s, 60 ms latency, gzip server, cold cache, median of 3 loads per page; fails a
# page over 1.2 s to first paint or 2 s of long tasks. Timings need an idle machine, so
# it is not part of `make test` (which checks each page's bytes); the workflow runs it
# in its own job. Needs a built site (make book) and Chromium.
browser-perf: $(STAMP)
	@start=$$(date +%s); \
	$(PY) tools/browser_perf.py _build/html; \
	echo "browser perf: $$(( $$(date +%s) - start )) s"

# The grader gives every chapter's own solutions full marks (sandboxes and clean runs
# included): no false verdict on honest work. Slow (every chapter, plus a clean run per
# exercise); its own CI job. GRADE_CHECK=full for the complete edition.
GRADE_CHECK ?= chapters
.PHONY: grade-check
grade-check: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) tools/grade_check.py $(GRADE_CHECK)

# Grade a student's notebook: make grade NB=path/to/submission.ipynb [GRADE_ARGS=...]
.PHONY: grade
grade: $(STAMP)
	@if [ -z "$(NB)" ]; then echo "usage: make grade NB=submission.ipynb"; exit 2; fi
	$(PY) -m attnlab.grade $(NB) $(GRADE_ARGS)

bench: $(STAMP)
	@for f in bench/*.py; do [ -e "$$f" ] || continue; echo "== $$f"; $(PY) $$f; done

clean:
	rm -rf _build _vendor _vendor.node .jupyter_cache jupyter_execute
