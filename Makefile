# The README's two commands: `make run` (the main job) and `make test` (the whole suite).
# Both set up their own environment first (scripts/bootstrap.sh is idempotent).
# The virtual environment: COPY_AS_DECODE_VENV when set (docs/configuration.md), else .venv;
# exported, so the setup scripts build the one the targets run.
VENV ?= $(or $(COPY_AS_DECODE_VENV),.venv)
export COPY_AS_DECODE_VENV := $(VENV)
PY := $(VENV)/bin/python

.PHONY: setup run test test-fast lint analyze
setup:
	@scripts/bootstrap.sh

# The main job: a headless edit of an example file with the embedded default model: program mode
# with the shipped span selector (--focus 3 is the line an editor's "AI fix" sends: the cursor's),
# its program and diff, and the same request in speculative and ar mode side by side. It runs on
# llama.cpp when llama-cpp-python is installed (`make test` installs it), else on transformers.
run: setup
	$(VENV)/bin/copy-as-decode edit examples/buggy_add.py --instruction "Fix the bug in add." \
		--mode program --focus 3 --compare speculative,ar --max-new-tokens 96

# The linter (configuration in pyproject.toml, [tool.ruff]); CI runs it before the tests.
lint: setup
	$(VENV)/bin/ruff check engine lsp_server tests scripts
	$(VENV)/bin/lint-imports

analyze: setup
	$(VENV)/bin/copy-as-decode analyze --corpus all --tokenizer default

# One torch thread per process: the tests run a server and a client process side by side, and
# the same thread count everywhere keeps greedy outputs bit-identical between them.
# Both serving engines are installed first: llama.cpp compiles (about 14 minutes on 2 cores, once
# per machine: pip caches the wheel) while vLLM's own venv installs beside it (about 5 minutes);
# the vLLM tests then start a real server (COPY_AS_DECODE_REQUIRE_VLLM: a missing venv fails them).
test: setup
	@scripts/system-deps.sh
	@scripts/vllm-venv.sh > .vllm-venv.log 2>&1 & vllm=$$!; \
	  scripts/install-llamacpp.sh; llama=$$?; \
	  wait $$vllm || { cat .vllm-venv.log; exit 1; }; exit $$llama
	COPY_AS_DECODE_REQUIRE_VLLM=1 OMP_NUM_THREADS=1 $(PY) -m pytest -q -rs

# The quick loop while changing code: every test that loads no model and drives no real editor
# (Neovim, VS Code) or vLLM server; it installs no system packages and compiles nothing. The model
# tests (pytest -m model) and the rest run in `make test`.
test-fast: setup
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -rs -m "not model and not editor and not vllm and not slow"
