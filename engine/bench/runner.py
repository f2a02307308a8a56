"""Runs a corpus case's tests on a candidate file (pass@1), isolated and with a timeout.

The runnable text is :meth:`engine.evaluation.corpora.EditCase.test_program` (HumanEvalFix: declaration +
candidate + "\\n" + test; CanItEdit: code + "\\n" + tests). Python runs with ``python -I``
(isolated: no user site, no PYTHON* variables, no script folder on sys.path); JavaScript with
``node``, where any "Assertion failed" in the output is a failure (``console.assert`` only
prints). Each run gets a fresh temporary folder as its working and home directory, a minimal
environment, its own process group (killed whole on timeout) and, where the OS allows, limits
on CPU time, memory (Python only: V8 reserves address space it never uses) and file size.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

DEFAULT_TIMEOUT_S = 15.0
_MEMORY_BYTES = 2 << 30
_FILE_BYTES = 16 << 20


@dataclass(frozen=True)
class TestOutcome:
    passed: bool
    status: str  # "pass", "fail", "timeout", "error" (runner could not start)
    detail: str = ""  # tail of the output, for failures
    seconds: float = 0.0


def _limits(cpu_s: int, memory: bool) -> Any:
    def apply() -> None:
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
            resource.setrlimit(resource.RLIMIT_FSIZE, (_FILE_BYTES, _FILE_BYTES))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if memory:
                resource.setrlimit(resource.RLIMIT_AS, (_MEMORY_BYTES, _MEMORY_BYTES))
        except (ImportError, ValueError, OSError):
            pass

    return apply


def command_for(language: str, path: str) -> list[str]:
    if language == "python":
        return [sys.executable, "-I", path]
    if language == "javascript":
        node = shutil.which("node")
        if node is None:
            raise FileNotFoundError("node is not installed: JavaScript tests need Node.js on PATH")
        return [node, path]
    raise ValueError(f"no test runner for language {language!r} (python and javascript are supported)")


def run_tests(case: Any, candidate: str | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> TestOutcome:
    """Run ``case``'s tests on ``candidate`` (a whole edited file; default: the gold)."""
    import time

    source = case.test_program(candidate)
    suffix = {"python": ".py", "javascript": ".js"}.get(case.language, ".txt")
    with tempfile.TemporaryDirectory(prefix="cad-test-") as folder:
        path = os.path.join(folder, "candidate" + suffix)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source)
        try:
            cmd = command_for(case.language, path)
        except (FileNotFoundError, ValueError) as exc:
            return TestOutcome(False, "error", str(exc))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": folder, "TMPDIR": folder,
               "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_limits(int(timeout) + 1, memory=case.language == "python"))
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            return TestOutcome(False, "timeout", f"no result after {timeout:.0f} s", time.perf_counter() - start)
        finally:
            _kill_group(proc)  # anything the test left running in its group
        seconds = time.perf_counter() - start
    text = out.decode("utf-8", errors="replace")
    failed = proc.returncode != 0 or (case.language == "javascript" and "Assertion failed" in text)
    return TestOutcome(not failed, "fail" if failed else "pass", text[-600:] if failed else "", seconds)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
