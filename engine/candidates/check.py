"""The user's check on one candidate: a command run on a temporary copy of the edited file.

The user's file is never touched: the candidate is written into a temporary mirror of the
file's folder (its siblings symlinked, nothing copied, so relative imports and sibling files
work), ``{file}`` in the command becomes the candidate's path there, and exit status 0 passes.
The command runs with the workspace folder (or the file's folder) as its working directory, in
its own process group (killed whole on timeout or cancel), with an environment scrubbed of
secrets: it runs the user's code, and the server's API keys are not its business.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from engine.core.choices import never_cancelled

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
POLL_S = 0.05  # how often a running check looks for a cancel
OUTPUT_LIMIT = 64_000  # characters of a check's output kept (its tail)
PLACEHOLDER = "{file}"


@dataclass
class CheckSpec:
    """A check command: ``{file}`` stands for the path of the temporary copy holding the
    candidate (quoted for the shell); ``cwd``: where it runs (None: the edited file's folder);
    ``secret_env``: more variable names to remove (the server's API key variable)."""

    command: str
    timeout_s: float = 60.0
    cwd: Path | None = None
    secret_env: tuple[str, ...] = ()


@dataclass
class CheckOutcome:
    """One check's result: ``passed`` when it exited 0; ``output`` its stdout and stderr (the
    tail, at most OUTPUT_LIMIT characters)."""

    passed: bool
    exit_code: int | None
    output: str
    seconds: float
    timed_out: bool = False
    cancelled: bool = False

    def json(self) -> dict[str, object]:
        return {"passed": self.passed, "exit_code": self.exit_code, "output": self.output,
                "seconds": round(self.seconds, 3), "timed_out": self.timed_out, "cancelled": self.cancelled}


def scrubbed_env(environ: Mapping[str, str], extra: tuple[str, ...] = ()) -> dict[str, str]:
    """``environ`` without any variable whose name holds KEY, TOKEN, SECRET or PASSWORD (in any
    case) or is named in ``extra``."""
    return {name: value for name, value in environ.items()
            if name not in extra and not any(marker in name.upper() for marker in SECRET_MARKERS)}


@contextmanager
def mirrored(path: Path, text: str) -> Iterator[Path]:
    """A temporary folder mirroring ``path``'s folder (each sibling a symlink, nothing copied)
    with ``text`` in a real file under ``path``'s name; yields that file's path, and removes the
    folder (links only, never their targets) afterwards."""
    source = path.resolve().parent
    with tempfile.TemporaryDirectory(prefix="copy-as-decode-check-") as folder:
        mirror = Path(folder)
        for sibling in source.iterdir():
            if sibling.name != path.name:
                (mirror / sibling.name).symlink_to(sibling, target_is_directory=sibling.is_dir())
        candidate = mirror / path.name
        candidate.write_text(text, encoding="utf-8", newline="")
        yield candidate


def command_for(spec: CheckSpec, candidate: Path) -> str:
    """The shell command with ``{file}`` replaced by the candidate's quoted path."""
    return spec.command.replace(PLACEHOLDER, shlex.quote(str(candidate)))


def run_check(spec: CheckSpec, path: Path, text: str, cancelled: Callable[[], bool] = never_cancelled) -> CheckOutcome:
    """Run ``spec`` on ``text`` as the content of ``path`` (in a temporary mirror of its folder).
    ``cancelled`` is polled every POLL_S seconds: once True, the check's process group is killed
    and the outcome says ``cancelled``."""
    started = time.perf_counter()
    with mirrored(path, text) as candidate:
        cwd = spec.cwd if spec.cwd is not None else path.resolve().parent
        with tempfile.TemporaryFile(mode="w+b") as out:
            process = subprocess.Popen(command_for(spec, candidate), shell=True, cwd=str(cwd), stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                       env=scrubbed_env(os.environ, spec.secret_env))
            timed_out = was_cancelled = False
            while process.poll() is None:
                if cancelled():
                    was_cancelled = True
                elif time.perf_counter() - started > spec.timeout_s:
                    timed_out = True
                if timed_out or was_cancelled:
                    kill_group(process)
                    break
                time.sleep(POLL_S)
            out.seek(0)
            output = out.read().decode("utf-8", errors="replace")[-OUTPUT_LIMIT:]
    code = process.returncode
    if timed_out:
        output += f"\n(the check ran past its {spec.timeout_s:g} s limit and was killed)"
    passed = code == 0 and not (timed_out or was_cancelled)
    return CheckOutcome(passed, code, output, time.perf_counter() - started, timed_out, was_cancelled)


def kill_group(process: subprocess.Popen) -> None:
    """Kill the check's whole process group (the shell and everything it started) and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def trimmed(output: str, lines: int = 20, chars: int = 1500) -> str:
    """The tail of a check's output that a second round's instruction quotes: at most ``lines``
    lines and ``chars`` characters (a failing test's last lines say what failed)."""
    tail = "\n".join(output.strip().splitlines()[-lines:])
    return tail[-chars:]
