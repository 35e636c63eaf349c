# Two commands, as in the README:
#   make book   create .venv, install, execute every notebook, render _build/html
#   make test   create .venv, install, lint, run all tests (package, notebooks, book
#               build), then re-execute the edition with nbval as if on another CPU
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
# and math library round the last bits differently. nbval re-executes it under Intel
# MKL's compatible code path and ATen's baseline kernels: a different rounding than
# the executing machine's, so an output that depends on the machine shows up here.
FOREIGN_CPU ?= MKL_CBWR=COMPATIBLE ATEN_CPU_CAPABILITY=default

.PHONY: book test lint execute html student clean

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

test: lint
	$(BIN)/python -m pytest
	env $(FOREIGN_CPU) $(BIN)/python -m pytest --nbval book

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

student: $(STAMP)
	$(BIN)/python scripts/book.py student

clean:
	rm -rf _build student
