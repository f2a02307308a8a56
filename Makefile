# The README's two commands: `make run` (the main job) and `make test` (the whole suite).
# Both set up their own environment first (scripts/bootstrap.sh is idempotent).
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup run test analyze
setup:
	@scripts/bootstrap.sh

run: setup
	$(VENV)/bin/copy-as-decode analyze --corpus all --tokenizer default

test: setup
	@scripts/system-deps.sh
	$(PY) -m pytest -q
