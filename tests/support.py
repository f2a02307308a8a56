"""Test data several test files share: the small buggy buffers every front door is tried on, and
a long one."""

import inspect
import textwrap

ADD = "def add(a, b):\n    return a - b\n"
ADD_DOCUMENTED = 'def add(a, b):\n    """Return the sum of a and b."""\n    return a - b\n'
ADD_AND_SUB = ADD_DOCUMENTED + "\n\ndef sub(a, b):\n    return a - b\n"


def long_function() -> str:
    """A 102-line function of the standard library with one operator changed (the editor-session
    benchmark's buffer): its program prompt is over ten transformers prefill chunks."""
    source = textwrap.dedent(inspect.getsource(textwrap.TextWrapper._wrap_chunks))
    return source.replace("self.width - len(indent)", "self.width + len(indent)", 1)


class StubClient:
    """What a remote runtime's messages name its server by."""

    display = "stub"


class StubServerRuntime:
    """The shape of a vLLM runtime with no HTTP and no server (a STUB for the client loop's own
    paths): subclasses say what ``stream_completion`` streams. The real server is exercised in
    tests/test_vllm_backend.py."""

    backend = "vllm"
    concurrent = True

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.client = StubClient()

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    def eos_ids(self) -> set[int]:
        return set()
