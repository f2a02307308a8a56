"""Decoding on a server that returns tokens, not logits (the vLLM backend).

Program mode is a client loop of segments. Each request sends the prompt as token ids (what the
in-process decoder would have fed by then: prompt, program so far, copied lines' tokens), the
grammar of what may follow in the program's current state, and stops at the copy close
(``"/>``). When a copy closes, the client appends the copied lines' tokens (line-aligned, as the
in-process splice does) and the literal the grammar then forces, and asks again: the server's
prefix cache holds everything before, so the copy is one prefill, the splice on vLLM.

The per-segment grammar carries the range rule a context-free grammar over the whole program
cannot: a copy starts at or after the line the previous one ended (``monotonic``), ends at or
after its start and at or before the last line, a gen never directly follows a gen, and
``</program>`` follows only a gen or a copy that reached the last line (``may_end_after``). Every
token the server sends is still checked against the client's own full program grammar and the
range rule (server output is untrusted); a violation is an error and the document stays as it was.

Text modes (ar, speculative, pld) are one streamed greedy completion. vLLM has no per-request
draft: its n-gram speculation is a server setting (``--speculative-config``), lossless under
greedy decoding, so ``speculative`` on vLLM is the server's own drafting when it was started with
it, and plain decoding otherwise; the output is the same either way.
"""

from __future__ import annotations

import contextlib
import re
import time
from typing import Callable, Iterator, Sequence

from engine.checks.guards import LoopGuard
from engine.core.tokens import IncrementalDetokenizer
from engine.decoding.events import OpResolved, TokenCounts
from engine.decoding.outcome import DecodeOutcome
from engine.decoding.program_walker import GrammarRefused, ProgramWalker, RuleBroken
from engine.decoding.prompt import TEXT_FENCE_CLOSE
from engine.decoding.tables import ModelTables
from engine.decoding.text_decoder import LineReporter, final_text
from engine.language.grammar import body_rule_after, gen_body_ebnf, int_between_ebnf
from engine.language.program import GEN_CLOSE, CopyLines, Gen, Program, merge_adjacent
from engine.runtime.backends.http_client import RemoteError
from engine.runtime.loaded import LoadedModel
from engine.runtime.protocol import RemoteRuntime

COPY_CLOSE = '"/>'


_COPY_OPEN = 'copy lines="'
_OP_LITERALS = (_COPY_OPEN, "gen>", "/program>")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def segment_ebnf(n_lines: int, next_line: int, after_gen: bool, may_end: bool, tag: str = "<",
                 gen_body: str | None = None) -> str:
    """Grammar of one segment: the rest of the program from where the client stopped (``tag``:
    the text of the op being written, from its ``<``; or inside a gen body that reads
    ``gen_body`` so far) up to the first copy close, a forced literal or ``</program>``.
    ``next_line``: the smallest line the next copy may start at (the range rule); ``may_end``:
    whether ``</program>`` may come before the next op (``engine.language.program.may_end_after``; after
    the gen a segment may write, it always may)."""
    copy_ok = next_line <= n_lines
    rules = []
    tail = ['"/program>"'] + (["copy"] if copy_ok else [])
    if copy_ok:
        rules.append(f'copy ::= {_quote(_COPY_OPEN)} pair "\\"/>"')
        rules.append("pair ::= " + " | ".join(f'("{i}-" r{i})' for i in range(next_line, n_lines + 1)))
        rules += [f"r{i} ::= {int_between_ebnf(i, n_lines)}" for i in range(next_line, n_lines + 1)]
    rules.append("tail ::= " + " | ".join(tail))
    gen_rest = 'bodyne "</gen>" "<" tail'
    if gen_body is not None:
        alts = [f'{body_rule_after(gen_body)} "</gen>" "<" tail']
        for k in range(1, len(GEN_CLOSE)):  # the body ends with the start of its own close
            if gen_body.endswith(GEN_CLOSE[:k]):
                alts.append(f'{_quote(GEN_CLOSE[k:])} "<" tail')
        root = alts
    else:
        typed = tag[1:]
        root = []
        for literal in _OP_LITERALS:
            allowed = {_COPY_OPEN: copy_ok, "gen>": not after_gen, "/program>": may_end}[literal]
            if not allowed:
                continue
            if literal.startswith(typed):
                rest = {_COPY_OPEN: 'pair "\\"/>"', "gen>": gen_rest, "/program>": ""}[literal]
                root.append(f"{_quote(literal[len(typed):])} {rest}".strip())
            elif literal == _COPY_OPEN and typed.startswith(_COPY_OPEN):
                root += _copy_rest(typed[len(_COPY_OPEN):], next_line, n_lines)
        if not root:
            raise ValueError(f"no program continues {tag!r} here")
    rules.insert(0, "root ::= " + " | ".join(f"({alt})" for alt in root))
    rules.append(gen_body_ebnf())
    return "\n".join(rules)


def _copy_rest(typed: str, low: int, n_lines: int) -> list[str]:
    """Continuations of a copy tag after ``<copy lines="`` + ``typed`` (digits, ``-``, ``"``)."""
    match = re.fullmatch(r"(\d*)", typed)
    if match:
        return [f'{_quote(str(i)[len(typed):] + "-")} r{i} "\\"/>"' for i in range(low, n_lines + 1)
                if str(i).startswith(typed)]
    match = re.fullmatch(r"(\d+)-(\d*)", typed)
    if match:
        start, prefix = int(match.group(1)), match.group(2)
        return [_quote(str(j)[len(prefix):] + '"/>') for j in range(start, n_lines + 1) if str(j).startswith(prefix)]
    match = re.fullmatch(r'(\d+)-(\d+)("/?)', typed)
    if match:
        return [_quote('"/>'[len(match.group(3)):])]
    raise ValueError(f"not a copy tag: {typed!r}")


EXCLUDED_BIAS = -100.0  # the lowest logit bias vLLM (and OpenAI) accept: the token is never picked


def exclusion_bias(ids) -> dict[str, float]:
    """The completions API's ``logit_bias`` that keeps the server from writing ``ids`` (the
    tokenizer's special tokens; :func:`reject_special` still checks what comes back)."""
    return {str(tok): EXCLUDED_BIAS for tok in sorted(ids)}


def reject_special(runtime: RemoteRuntime, tables: ModelTables, tok: int) -> None:
    """A special token (a chat marker, padding) in the output is an error, never text: the
    document stays as it was. The end tokens are the caller's to stop on, before this check."""
    if tok in tables.special_ids and tok not in tables.stop_ids:
        raise RemoteError(f"{runtime.address}: the server sent the special token {tok} "
                          f"({tables.vocab_texts[tok]!r}) inside the edit's output; nothing was written")


class SentTranscript:
    """The tokens a server is sent with each request (the :class:`ProgramWalker`'s session here):
    the prompt, then everything the walk wrote and spliced. Appending runs nothing; the server's
    prefix cache makes the next request's prefill cover only what is new."""

    def __init__(self, prompt_ids: Sequence[int]):
        self.tokens = list(prompt_ids)

    @property
    def length(self) -> int:
        return len(self.tokens)

    def append(self, ids: Sequence[int], kind: str, rows: Sequence[int] | None = None,
               marks: Sequence[int] = ()) -> None:
        self.tokens.extend(ids)

    def crop(self, length: int) -> None:
        del self.tokens[length:]

    def close(self) -> None:
        pass


class RemoteProgramDecoder:
    """Program mode against a token-returning server; yields OpResolved events, then one
    :class:`DecodeOutcome`. The server's tokens go through the same walk as the in-process
    decoder's choices (:class:`engine.decoding.program_walker.ProgramWalker`: same grammar, same
    splice tokenization, same forced literals, and every op checked against the range rule since
    the server is not masked here), so under greedy decoding it writes the same program up to the
    numerics of the two backends and the tokenization the server's model picks for literals
    inside a segment."""

    def __init__(self, loaded: LoadedModel, tables: ModelTables, region: str, prompt_ids: Sequence[int],
                 max_new_tokens: int, cancelled: Callable[[], bool], monotonic: bool = True,
                 sampling: dict | None = None):
        self.runtime: RemoteRuntime = loaded.runtime  # the strategies run this decoder on servers only
        self.tables = tables
        self.max_new_tokens, self.cancelled = max_new_tokens, cancelled
        self.sampling = sampling or {}  # temperature and seed when sampling (greedy otherwise)
        self.transcript = SentTranscript(prompt_ids)
        self.walk = ProgramWalker(loaded.tokenizer, tables, region, max_new_tokens, self.transcript,
                                  vocab_size=loaded.vocab_size, monotonic=monotonic, checked=True)
        self.writer = self.walk.writer
        self.requests = 0
        self.request_s = 0.0

    def run(self) -> Iterator[OpResolved | DecodeOutcome]:
        stop_reason = "done"
        walk = self.walk
        with self.server_errors():
            walk.take_forced()
        while not walk.matcher.is_terminated():
            if self.cancelled():
                stop_reason = "cancelled"
                break
            budget = self.max_new_tokens - self.writer.generated - self.writer.forced
            if budget <= 0:
                stop_reason = "max_tokens"
                break
            stop_reason = yield from self.segment(budget)
            if stop_reason != "done":
                break
            with self.server_errors():
                walk.take_forced()
        yield from self.writer.flush()
        yield self.outcome(stop_reason)

    def segment(self, budget: int) -> Iterator[OpResolved]:
        """One request: stream tokens until the copy closes, the program ends or the budget is spent."""
        walk, scanner, ranges = self.walk, self.writer.scanner, self.walk.ranges
        grammar = segment_ebnf(len(walk.lines), ranges.next_line, ranges.after_gen, ranges.may_end, scanner.tag,
                               scanner.body if scanner.in_gen else None)
        extra = {"structured_outputs": {"grammar": grammar}, "stop": [COPY_CLOSE], "include_stop_str_in_output": True,
                 "stop_token_ids": sorted(self.tables.stop_ids),
                 "logit_bias": exclusion_bias(self.tables.special_ids - self.tables.stop_ids), **self.sampling}
        start = time.perf_counter()
        self.requests += 1
        self.writer.lookahead = None  # a lookahead refers to this segment's tokens (one only ends one at the limit)
        walk.feed("request")  # what the walk wrote since the last request joins what the server is sent
        finish = None
        stream = self.runtime.stream_completion(list(self.transcript.tokens), budget, self.cancelled, **extra)
        try:
            for ids, finish in stream:  # noqa: B007 - read after the loop (a cut at the budget)
                closed = False
                for tok in ids:
                    if tok in self.tables.stop_ids:
                        continue
                    if self.take(tok):
                        closed = True  # the client wrote what follows (</gen>, a forced literal)
                        break
                yield from self.writer.flush()
                if closed:
                    return "done"
                if self.writer.degenerate():
                    return "loop"
        finally:
            stream.close()  # stop reading: the server aborts a request whose connection is gone
            self.request_s += time.perf_counter() - start
        if self.cancelled():
            return "cancelled"
        if finish == "length" and not walk.matcher.is_terminated() and not self._at_copy_close():
            return "max_tokens"
        if finish is None and not walk.matcher.is_terminated() and not self._at_copy_close():
            raise RemoteError(f"{self.runtime.address}: the completion ended without a finish reason (truncated)")
        return "done"

    def _at_copy_close(self) -> bool:
        ops, scanner = self.writer.ops, self.writer.scanner
        return bool(ops) and isinstance(ops[-1], CopyLines) and not scanner.in_gen and scanner.tag == ""

    def take(self, tok: int) -> bool:
        """One server token into the walk (checked against the client's grammar and the range
        rule). True when the segment ends here: the grammar forced a literal after it, or the
        token showed that a gen line the model began with ``<`` was an op (the walk then takes
        that ``<`` back and writes ``</gen>``, as in-process), or it closed a gen that rewrote the
        next input line (the range rule moved past it, which this segment's grammar, written
        before the gen, could not know); the server's speculative tokens after it are dropped."""
        reject_special(self.runtime, self.tables, tok)
        with self.server_errors():
            if self.writer.meant_op(self.tables.vocab_texts[tok]):
                self.walk.close_gen_instead()
                return True
            ops, next_line = len(self.writer.ops), self.walk.ranges.next_line
            forced = self.walk.take_choice(tok) > 0
            wrote_gen = any(isinstance(op, Gen) for op in self.writer.ops[ops:])
            return forced or (wrote_gen and self.walk.ranges.next_line != next_line)

    @contextlib.contextmanager
    def server_errors(self) -> Iterator[None]:
        """What the walk refuses is the server's fault: a :class:`RemoteError` naming it."""
        address = self.runtime.address
        try:
            yield
        except GrammarRefused as exc:
            text = self.tables.vocab_texts[exc.token]
            raise RemoteError(f"{address}: the server's output left the program grammar at token {exc.token} "
                              f"({text!r}); is structured output enabled?") from None
        except RuleBroken as exc:
            raise RemoteError(f"{address}: the server {exc}") from None

    def outcome(self, stop_reason: str) -> DecodeOutcome:
        breakdown = {"request_s": round(self.request_s, 6), "requests": self.requests,
                     "decode_steps": self.writer.generated}
        return self.writer.outcome(stop_reason, breakdown)


def decode_text_remote(loaded: LoadedModel, tables: ModelTables, region: str, prompt_ids: Sequence[int],
                       max_new_tokens: int, cancelled: Callable[[], bool],
                       sampling: dict | None = None) -> Iterator[OpResolved | DecodeOutcome]:
    """ar / speculative / pld on the server: one streamed greedy completion (see the module doc)."""
    started = time.perf_counter()
    runtime: RemoteRuntime = loaded.runtime  # the strategies run this decoder on servers only
    tokenizer = loaded.tokenizer
    reporter = LineReporter(region, started)
    detok = IncrementalDetokenizer(tokenizer)
    guard, loop_warning = LoopGuard(region), None
    out: list[int] = []
    stop_reason, finish = "done", None
    extra = {"stop": [TEXT_FENCE_CLOSE], "stop_token_ids": sorted(tables.stop_ids),
             "logit_bias": exclusion_bias(tables.text_blocked_ids()), **(sampling or {})}
    for ids, finish in runtime.stream_completion(list(prompt_ids), max_new_tokens, cancelled, **extra):  # noqa: B007 - read after the loop
        new = [t for t in ids if t not in tables.stop_ids]
        for tok in new:
            reject_special(runtime, tables, tok)
        out.extend(new)
        detok.push(new)
        if TEXT_FENCE_CLOSE in detok.text:
            break
        yield from reporter.report(detok.text, TokenCounts(len(out), 0, 0))
        loop_warning = guard.check_when_due(detok.text)
        if loop_warning:
            stop_reason = "loop"
            break
    if cancelled():
        stop_reason = "cancelled"
    elif stop_reason == "done" and finish == "length":
        stop_reason = "max_tokens"
    elif stop_reason == "done" and finish is None and TEXT_FENCE_CLOSE not in detok.text:
        raise RemoteError(f"{runtime.address}: the completion ended without a finish reason (truncated)")
    text = final_text(detok.text, region)
    counts = TokenCounts(len(out), 0, 0)
    yield from reporter.report(text, counts, final=True)
    yield DecodeOutcome(program=Program(merge_adjacent(reporter.ops)), region_output=text, raw_output=detok.text,
                        tokens=counts, stop_reason=stop_reason,
                        breakdown={"request_s": round(time.perf_counter() - started, 6), "requests": 1,
                                   "output_tokens": len(out)},
                        warnings=[loop_warning] if loop_warning else [])
