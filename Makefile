# Two commands, as in the README:
#   make book   create .venv, install, execute every notebook, render _build/html
#   make test   create .venv, install, lint, run all tests (package, notebooks, book
#               build), then re-execute the edition with nbval as if on another CPU
#   make check  lint and the fast tests only (everyday work; CONTRIBUTING.md)
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PROFILE ?= auto
DEVICE  ?= auto
export HF_HUB_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export TOKENIZERS_PARALLELISM := false
# Training loops draw no progress bars while the pipeline or the tests run notebooks.
export TRANSFORMER_BOOK_PROGRESS := 0
# The edition was executed on one machine and is read and tested on others, whose CPU
# and math library round the last bits differently. nbval re-executes it with ATen, MKL
# and oneDNN all moved off the machine's own code paths (tests/foreign_cpu.env says
# which, tests/test_foreign_cpu.py checks that each moves), so an output that depends
# on the machine shows up here.
FOREIGN_CPU ?= $(shell grep -v '^\s*\(\#\|$$\)' tests/foreign_cpu.env)
# Test processes (pytest-xdist): every chapter runs on one thread, so one notebook per
# core keeps both cores of a 2-core machine busy. More cores: make test JOBS=4.
JOBS ?= 2
# ... and one thread per process: a process that takes two threads shares a core with
# the other, and OpenMP threads waiting on each other then run many times slower.
ONE_THREAD := OMP_NUM_THREADS=1 TRANSFORMER_BOOK_MAX_THREADS=1
# Each phase prints its wall time (.ci/run's log shows where the minutes go).
TIMED := scripts/timed

.PHONY: book test check lint execute html student release clean

$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first and pinned: an unpinned torch can pull a multi-GB CUDA build
	$(BIN)/python -m pip install -q "$$(grep -E '^torch==' requirements.txt)"
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -r requirements-nodeps.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

book: execute html

execute: $(STAMP)
	$(BIN)/python scripts/book.py execute --profile $(PROFILE) --device $(DEVICE)

html: $(STAMP)
	$(BIN)/jupyter-book build . -W -n --keep-going
	@echo "open _build/html/index.html"

# The tests and the edition run as two pytest-xdist sessions: the tests by module (the
# two that render the book share one build), the edition by notebook, longest
# chapter first (its recorded seconds), so that no core idles at the end.
test:
	@$(TIMED) install $(MAKE) --no-print-directory $(STAMP)
	@$(TIMED) lint $(MAKE) --no-print-directory lint
	@$(TIMED) tests env $(ONE_THREAD) $(BIN)/python -m pytest -n $(JOBS) --dist loadscope
	@$(TIMED) nbval env $(ONE_THREAD) $(FOREIGN_CPU) $(BIN)/python -m pytest -n $(JOBS) \
	    --dist loadscope --no-loadscope-reorder --nbval \
	    $$($(BIN)/python scripts/book.py order)

# Everyday work: lint and the tests without the slow tiers (markers in pyproject.toml:
# the book build, the browser, torchrun, the grader, whole-dataset parity) and without
# re-executing the edition. `make test` is the full gate.
check: lint
	env $(ONE_THREAD) $(BIN)/python -m pytest -n $(JOBS) --dist loadscope \
	    -m "not (book or browser or distributed or grading or dataset or colab)"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# One dated archive of the course (site, notebooks, student edition, nbgrader course,
# wheel, checkpoints, licences, MANIFEST.tsv): dist/transformers-step-by-step-DATE.tar.gz
release: html
	$(BIN)/python scripts/book.py release

# Retrain every checkpoint the book ships (src/transformer_book/trained/NAME/: fp16
# weights and a card) from its recipe in scripts/train_checkpoints.py; one NAME with
# `$(BIN)/python scripts/train_checkpoints.py NAME`. Minutes of CPU each.
.PHONY: checkpoints
checkpoints: $(STAMP)
	$(BIN)/python scripts/train_checkpoints.py

student: $(STAMP)
	$(BIN)/python scripts/book.py student

clean:
	rm -rf _build student
