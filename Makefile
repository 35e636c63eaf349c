# Two commands, as in the README:
#   make book   create .venv, install, execute every notebook, render _build/html
#   make test   create .venv, install, run all tests (package, notebooks, nbval, book build)
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PROFILE ?= auto
DEVICE  ?= auto
export HF_HUB_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: book test execute html student clean

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first and pinned: an unpinned torch can pull a multi-GB CUDA build
	$(BIN)/python -m pip install -q "$$(grep -E '^torch==' requirements.txt)"
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

book: execute html

execute: $(STAMP)
	$(BIN)/python scripts/book.py execute --profile $(PROFILE) --device $(DEVICE)

html: $(STAMP)
	$(BIN)/jupyter-book build . -W -n --keep-going
	@echo "open _build/html/index.html"

test: $(STAMP)
	$(BIN)/python -m pytest

student: $(STAMP)
	$(BIN)/python scripts/book.py student

clean:
	rm -rf _build student
