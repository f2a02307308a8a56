"""Reuse of the last prompts' KV cache across edits (an editor's second AI fix on the same buffer).

An edit's prompt is mostly the same as the previous edit's on the same file (system prompt,
instructions, the region), so its prefill recomputes keys and values the runtime had a moment
ago. A :class:`PrefixStore` keeps the KV state of the last prompts (a backend's own object: a
transformers ``DynamicCache``, a llama.cpp context) with the tokens it holds; a new session takes
the entry sharing the longest token prefix with its first append, crops it to that prefix and
forwards only the rest. An entry is taken only when at least half of it is shared (MIN_SHARE):
a prompt that shares just the system prompt with an entry (the localizer's before the program
prompt of the same edit) would otherwise crop away what the next edit's same prompt needs.
The store is bounded by a token budget (``max_tokens``, 0 turns reuse off) and a number of
entries; an entry is taken out while a session uses it, so two concurrent sessions never share
one. Outputs do not change: prefills run in aligned chunks, also cut at the prompt's marks (where
prompts that share all before them go on differently, see :meth:`engine.runtime.session.Session.append`);
a reused prefix ends at a chunk boundary that both prompts' chunk plans share up to there, so the
reused keys and values are bit for bit those a fresh prefill computes. An entry also keeps the
logits after its last token when the session that made it computed them as a prefill does: the same prompt again (the program prompt
right after the localizer read it) then forwards nothing at all.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Generic, NamedTuple, Sequence, TypeVar

from engine.core.defaults import PREFIX_CACHE_TOKENS

State = TypeVar("State")

MAX_ENTRIES = 4
MIN_SHARE = 0.5


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass
class Entry(Generic[State]):
    tokens: list[int]
    state: State
    last_logits: Any = None  # the logits after the last token (None: not kept)
    cuts: tuple[int, ...] = ()  # where its prefill cut chunks besides multiples of the alignment


class Taken(NamedTuple, Generic[State]):
    """What :meth:`PrefixStore.take` hands out: the state, how many leading tokens it shares with
    the prompt asked for, its last logits when it holds exactly that prompt (else None), and where
    its prefill cut chunks besides multiples of the alignment."""

    state: State
    common: int
    last_logits: Any = None
    cuts: tuple[int, ...] = ()


class PrefixStore(Generic[State]):
    """The KV states of recent prompts, most recent last. ``release`` is called on every state the
    store lets go of (evicted, or refused when reuse is off), so a backend can free or pool it."""

    def __init__(self, max_tokens: int = PREFIX_CACHE_TOKENS, max_entries: int = MAX_ENTRIES,
                 release: Callable[[State], None] | None = None):
        self.max_tokens, self.max_entries = max_tokens, max_entries
        self.release = release or (lambda state: None)
        self._entries: list[Entry[State]] = []
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.max_tokens > 0 and self.max_entries > 0

    def tokens_held(self) -> int:
        with self._lock:
            return sum(len(e.tokens) for e in self._entries)

    def take(self, ids: Sequence[int]) -> Taken[State] | None:
        """Remove and return the entry sharing the longest prefix with ``ids`` (and that length),
        or None when no entry shares MIN_SHARE of its tokens with it."""
        with self._lock:
            best, best_n = -1, 0
            for i, entry in enumerate(self._entries):
                n = common_prefix(entry.tokens, ids)
                if n > best_n and n >= MIN_SHARE * len(entry.tokens):
                    best, best_n = i, n
            if best < 0:
                return None
            entry = self._entries.pop(best)
        exact = best_n == len(entry.tokens) == len(ids)
        return Taken(entry.state, best_n, entry.last_logits if exact else None, entry.cuts)

    def put(self, tokens: Sequence[int], state: State, last_logits: Any = None,
            cuts: Sequence[int] = ()) -> None:
        """Keep ``state`` (holding exactly ``tokens``, and ``last_logits`` after them if given; its
        prefill cut chunks at ``cuts`` too) as the most recent entry, evicting the oldest entries
        over budget."""
        if not self.enabled or not tokens or len(tokens) > self.max_tokens:
            self.release(state)
            return
        evicted: list[State] = []
        with self._lock:
            self._entries.append(Entry(list(tokens), state, last_logits,
                                       tuple(c for c in cuts if c <= len(tokens))))
            total = sum(len(e.tokens) for e in self._entries)
            while len(self._entries) > self.max_entries or total > self.max_tokens:
                old = self._entries.pop(0)
                total -= len(old.tokens)
                evicted.append(old.state)
        for old_state in evicted:
            self.release(old_state)

    def clear(self) -> None:
        """Let go of every entry (benchmarks that must not reuse; closing a runtime)."""
        with self._lock:
            entries, self._entries = self._entries, []
        for entry in entries:
            self.release(entry.state)
