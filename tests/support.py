"""Test data several test files share: the small buggy buffers every front door is tried on, and
a long one."""

import asyncio
import inspect
import textwrap
import time
from collections.abc import Awaitable, Callable
from typing import Any

from engine.runtime.kinds import ServerRuntime

ADD = "def add(a, b):\n    return a - b\n"
ADD_DOCUMENTED = 'def add(a, b):\n    """Return the sum of a and b."""\n    return a - b\n'
ADD_AND_SUB = ADD_DOCUMENTED + "\n\ndef sub(a, b):\n    return a - b\n"


async def wait_until(predicate: Callable[[], Awaitable[bool]], what: str, client: Any, timeout: float = 20) -> None:
    """Poll ``predicate`` until it holds (a language server's asynchronous answer: a reload, a
    message, a warm-up); on timeout, fail naming ``what`` and the messages ``client`` was shown."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; messages: {[m.message for m in client.messages]}")


def long_function() -> str:
    """A 102-line function of the standard library with one operator changed (the editor-session
    benchmark's buffer): its program prompt is over ten transformers prefill chunks."""
    source = textwrap.dedent(inspect.getsource(textwrap.TextWrapper._wrap_chunks))
    return source.replace("self.width - len(indent)", "self.width + len(indent)", 1)


class StubServerRuntime(ServerRuntime):
    """The shape of a vLLM runtime with no HTTP and no server (a STUB for the client loop's own
    paths): subclasses say what ``stream_completion`` streams. The real server is exercised in
    tests/test_vllm_backend.py."""

    backend = "vllm"
    address = "stub"  # what a remote runtime's messages name its server by

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    def eos_ids(self) -> set[int]:
        return set()
