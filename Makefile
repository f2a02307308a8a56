# The README's two commands: `make run` (the main job) and `make test` (the whole suite).
# Both set up their own environment first (scripts/bootstrap.sh is idempotent).
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup run test analyze
setup:
	@scripts/bootstrap.sh

# The main job: a headless edit of an example file with the embedded default model: program mode
# with the shipped span selector (--focus 3 is the line an editor's "AI fix" sends: the cursor's),
# its program and diff, and the same request in speculative and ar mode side by side.
run: setup
	$(VENV)/bin/copy-as-decode edit examples/buggy_add.py --instruction "Fix the bug in add." \
		--mode program --focus 3 --compare speculative,ar --max-new-tokens 96

analyze: setup
	$(VENV)/bin/copy-as-decode analyze --corpus all --tokenizer default

# One torch thread per process: the tests run a server and a client process side by side, and
# the same thread count everywhere keeps greedy outputs bit-identical between them.
test: setup
	@scripts/system-deps.sh
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -rs
