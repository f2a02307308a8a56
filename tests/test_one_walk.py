"""One program walk and one table of mode strategies (no model: a tokenizer at most).

The in-process decoder, the vLLM client loop and the model-free bounds all walk a program through
engine.decoding.program_walker.ProgramWalker; run_edit looks each mode up in one table."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Iterator

import pytest
from support import StubServerRuntime

from engine.api import EditRequest, Engine
from engine.core.choices import MODES
from engine.bench import bounds
from engine.core.errors import EditError
from engine.decoding import remote_decode
from engine.decoding.run import run_edit
from engine.decoding.strategies import STRATEGIES, InProcessOnly, RemoteProgram, RemoteText
from engine.language.program import CopyLines, Program
from engine.runtime.loaded import LoadedModel
from engine.runtime.sources import load_tokenizer
from engine.runtime.protocol import is_local


@pytest.mark.parametrize("module", [remote_decode, bounds])
def test_no_second_copy_of_the_walk(module: Any) -> None:
    """Accepting tokens, forcing literals and splicing happen in the walker only."""
    source = inspect.getsource(module)
    for walk_step in ("accept_forced_literal", ".accept_token(", "line_ids[", "RangeConstraint(", "ProgramScanner("):
        assert walk_step not in source, (module.__name__, walk_step)


def test_structure_from_a_ledger() -> None:
    """Literals before the first choice ride with the prefill; once the program ended, what the
    last choice forced and the copy it closed (the program had to end there) are never fed."""
    ledger = [("forced", 3), ("chosen", 0), ("forced", 2), ("chosen", 1), ("chosen", 0), ("copied", 7),
              ("forced", 1), ("forced", 4)]
    s = bounds.structure_of(ledger, terminated=True, must_end=True)
    assert (s.chosen, s.gen_chosen, s.prefix_literal_tokens) == (3, 1, 3)
    assert (s.literal_runs, s.trailing_literal_tokens, s.splices, s.trailing_splice) == ([2], 5, [], 7)
    open_ended = bounds.structure_of(ledger, terminated=False, must_end=False)
    assert (open_ended.literal_runs, open_ended.splices, open_ended.trailing_literal_tokens) == ([2, 1, 4], [7], 0)


def test_every_mode_has_a_strategy_on_both_kinds_of_runtime() -> None:
    from engine.apply.job import APPLY_WRITERS, modeled, refused_on_a_server
    from engine.core.modes import modes_where

    assert set(STRATEGIES) == set(modes_where(apply_only=False)) == set(MODES) - {"auto", "aligner"}
    # an apply: every mode a model writes, but forced (a given program: an apply has the aligner's)
    assert set(APPLY_WRITERS) == set(modes_where(needs_model=True, given_program=False))
    assert APPLY_WRITERS["program"] == (modeled, refused_on_a_server)
    assert isinstance(STRATEGIES["forced"].on_server, InProcessOnly)
    assert isinstance(STRATEGIES["program"].on_server, RemoteProgram)
    assert all(isinstance(STRATEGIES[m].on_server, RemoteText) for m in ("ar", "speculative", "pld"))


class _StubServer(StubServerRuntime):
    """A remote runtime that must never be asked for a completion (every edit here is refused)."""

    def describe(self) -> str:
        return "the stub server"

    def stream_completion(self, prompt_ids: list[int], max_tokens: int, cancelled: Callable[[], bool],
                          **extra: Any) -> Iterator[tuple[list[int], str | None]]:
        raise AssertionError("a refused edit sent a request")


@pytest.fixture(scope="module")
def remote() -> LoadedModel:
    tokenizer = load_tokenizer("default")
    return LoadedModel(name="default", model=None, tokenizer=tokenizer, device="remote", dtype="remote",
                       runtime=_StubServer(tokenizer))


@pytest.mark.parametrize("mode, token_copies", [("forced", False), ("program", True), ("ar", True)])
def test_a_server_refuses_what_needs_logits(remote: LoadedModel, mode: str, token_copies: bool) -> None:
    assert not is_local(remote.runtime)
    program = Program((CopyLines(1, 1),)) if mode == "forced" else None
    request = EditRequest(text="x = 1\n", instruction="keep", mode=mode, token_copies=token_copies,
                          program=program)
    with pytest.raises(EditError, match="the stub server runs program.*need an in-process backend"):
        next(run_edit(remote, request, lambda: False))


class _RecordingServer(StubServerRuntime):
    """A remote runtime that records the completions it is asked for and answers each at once."""

    def __init__(self, tokenizer: Any) -> None:
        super().__init__(tokenizer)
        self.requests: list[tuple[int, int]] = []

    def describe(self) -> str:
        return "the recording stub"

    def stream_completion(self, prompt_ids: list[int], max_tokens: int, cancelled: Callable[[], bool],
                          **extra: Any) -> Iterator[tuple[list[int], str | None]]:
        self.requests.append((len(prompt_ids), max_tokens))
        yield [], "length"


def test_on_a_server_the_warm_up_sends_the_edits_first_prompt_through_the_strategy_table() -> None:
    """A server batches edits itself (Engine.concurrent) and answers are not read ahead there: the
    mode's strategy sends the edit's own prompt as a one-token request; pld reads nothing ahead."""
    tokenizer = load_tokenizer("default")
    server = _RecordingServer(tokenizer)
    engine = Engine(LoadedModel(name="default", model=None, tokenizer=tokenizer, device="remote", dtype="remote",
                                runtime=server))
    assert engine.concurrent
    warm = engine.read_ahead(EditRequest(text="def add(a, b):\n    return a - b\n", instruction="Fix it", mode="ar"))
    assert (warm.status, warm.answered) == ("done", False) and warm.prompt_tokens > 0
    assert server.requests == [(warm.prompt_tokens, 1)] and warm.forwarded == warm.prompt_tokens
    skipped = engine.warm_prompt(EditRequest(text="x = 1\n", instruction="keep", mode="pld"))
    assert (skipped.status, skipped.reason) == ("skipped", "pld mode reads no prompt ahead")
    assert len(server.requests) == 1
