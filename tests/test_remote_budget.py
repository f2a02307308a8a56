"""The vLLM program decoder when the server stops a segment at the token budget (finish reason
``length``): the edit ends as ``max_tokens`` with the rest of the input kept, like the in-process
decoder, not as a truncated-response error. Driven by a stub runtime (no HTTP, no server)."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest
from support import StubServerRuntime

from engine.decoding.remote_decode import RemoteProgramDecoder
from engine.decoding.tables import tables_for
from engine.runtime.backends.http_client import RemoteError
from engine.runtime.loaded import LoadedModel

REGION = "def add(a, b):\n    return a - b\n"


class _StubRuntime(StubServerRuntime):
    """Streams the given reply in one chunk, then the finish reason."""

    def __init__(self, tokenizer: Any, reply: list[int], finish: str | None):
        super().__init__(tokenizer)
        self.reply, self.finish = reply, finish

    def stream_completion(self, prompt_ids: list[int], max_tokens: int, cancelled: Callable[[], bool],
                          **extra: Any) -> Iterator[tuple[list[int], str | None]]:
        yield self.reply, None
        yield [], self.finish


def _decode(tokenizer: Any, reply: str, finish: str | None) -> list:
    runtime = _StubRuntime(tokenizer, tokenizer.encode(reply, add_special_tokens=False), finish)
    loaded = LoadedModel(name="default", model=None, tokenizer=tokenizer, device="remote", dtype="remote",
                         runtime=runtime)
    decoder = RemoteProgramDecoder(loaded, tables_for(loaded), REGION, [1, 2, 3], 100, lambda: False)
    return list(decoder.run())


def test_a_segment_cut_at_the_budget_ends_as_max_tokens(tokenizer):
    outcome = _decode(tokenizer, "gen>def add(a, b):\n    return", "length")[-1]
    assert outcome.stop_reason == "max_tokens"
    assert outcome.region_output == REGION  # no op finished: the input is kept as it was
    assert any("hit the limit of 100 new tokens" in w for w in outcome.warnings)


def test_a_segment_without_a_finish_reason_is_still_an_error(tokenizer):
    with pytest.raises(RemoteError, match="without a finish reason"):
        _decode(tokenizer, "gen>def add(a, b):\n    return", None)
