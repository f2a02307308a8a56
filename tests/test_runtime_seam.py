"""Local or remote is the runtime's own business (engine.runtime.protocol): outside engine/runtime/
no code asks a model whether it is remote, reaches for a runtime's attributes by name, or compares
a backend's name; the runtime's kind is read in one place, the decoding strategies' table, and
everywhere else the runtime's declared facts and methods answer."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("engine", "lsp_server")
LEFT_OUT = ("engine/runtime/",)
FORBIDDEN = re.compile(
    r"\.remote\b"                                                   # LoadedModel.remote
    r"|\b(?:get|has)attr\((?:\w+\.)?runtime\b"                      # getattr(runtime, ...), hasattr(loaded.runtime, ...)
    r"""|[!=]=\s*["'](?:transformers|llamacpp|vllm)["']"""          # == "vllm"
    r"""|["'](?:transformers|llamacpp|vllm)["']\s*[!=]="""          # "vllm" ==
)


def offending_lines() -> list[str]:
    found = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name.startswith(LEFT_OUT):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if FORBIDDEN.search(line):
                    found.append(f"{name}:{number}: {line.strip()}")
    return found


def test_no_caller_outside_the_runtime_asks_which_runtime_it_holds() -> None:
    assert offending_lines() == []


def test_the_grep_finds_what_it_looks_for() -> None:
    for line in ('if loaded.remote:', 'getattr(loaded.runtime, "concurrent", False)', 'hasattr(runtime, "x")',
                 'if backend == "vllm":', "'llamacpp' != name"):
        assert FORBIDDEN.search(line), line
    for line in ("remote_decode.py", "is_local(loaded.runtime)", 'backend == "auto"', "loaded.runtime.concurrent"):
        assert not FORBIDDEN.search(line), line


KIND_READ = re.compile(r"\bis_local\(|\.client\.display\b")
KIND_READERS = ("engine/runtime/", "engine/decoding/strategies.py", "engine/apply/job.py")  # the two strategy tables


def test_only_the_strategies_table_reads_the_runtimes_kind() -> None:
    found = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name.startswith(KIND_READERS):
                continue
            found += [f"{name}:{number}: {line.strip()}"
                      for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                      if KIND_READ.search(line)]
    assert found == []
    assert KIND_READ.search("if is_local(loaded.runtime):") and KIND_READ.search("f'{runtime.client.display}'")
