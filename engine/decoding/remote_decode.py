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

import re
import time
from typing import Callable, Iterator, Sequence

from engine.checks.guards import LoopGuard
from engine.core.lines import split_lines
from engine.core.tokens import IncrementalDetokenizer, encode
from engine.decoding.events import OpResolved, TokenCounts
from engine.decoding.outcome import DecodeOutcome
from engine.decoding.program_writer import ProgramWriter, accept_forced_literal
from engine.decoding.prompt import TEXT_FENCE_CLOSE
from engine.decoding.tables import ModelTables
from engine.decoding.text_decoder import LineReporter, final_text
from engine.language.grammar import RangeConstraint, body_rule_after, gen_body_ebnf, int_between_ebnf
from engine.language.program import GEN_CLOSE, CopyLines, Gen, Program, merge_adjacent
from engine.runtime.backends.http_client import RemoteError
from engine.runtime.models import LoadedModel

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


class RemoteProgramDecoder:
    """Program mode against a token-returning server; yields OpResolved events, then one
    :class:`DecodeOutcome`. Same prompt, same splice tokenization and same forced literals as the
    in-process decoder, so under greedy decoding it writes the same program up to the numerics of
    the two backends and the tokenization the server's model picks for literals inside a segment."""

    def __init__(self, loaded: LoadedModel, tables: ModelTables, region: str, prompt_ids: Sequence[int],
                 max_new_tokens: int, cancelled: Callable[[], bool], monotonic: bool = True,
                 sampling: dict | None = None):
        self.started = time.perf_counter()
        self.runtime, self.tables, self.tokenizer = loaded.runtime, tables, loaded.tokenizer
        self.lines = split_lines(region)
        self.line_ids = [encode(self.tokenizer, line) for line in self.lines]
        self.fed = list(prompt_ids)
        self.max_new_tokens, self.cancelled = max_new_tokens, cancelled
        self.sampling = sampling or {}  # temperature and seed when sampling (greedy otherwise)
        self.matcher = tables.grammar.matcher(len(self.lines), 0)
        self.writer = ProgramWriter(self.tokenizer, region, self.lines, max_new_tokens, self.started)
        # The range rule's state (next line, gen after gen, may </program> come next): the same
        # object the in-process decoder masks with; here it writes each segment's grammar and
        # checks the server's ops against it.
        self.ranges = RangeConstraint(tables.vocab_texts, len(self.lines), 0, monotonic=monotonic, lines=self.lines)
        # A gen that rewrote the next line moves the range rule past it (RangeConstraint), which the
        # segment's grammar, written before the gen, could not know: the segment ends there.
        self.rule_moved = False
        self.requests = 0
        self.request_s = 0.0

    def run(self) -> Iterator[OpResolved | DecodeOutcome]:
        stop_reason = "done"
        self.take_forced()
        while not self.matcher.is_terminated():
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
            self.take_forced()
        yield from self.flush()
        yield self.outcome(stop_reason)

    def segment(self, budget: int) -> Iterator[OpResolved]:
        """One request: stream tokens until the copy closes, the program ends or the budget is spent."""
        scanner = self.writer.scanner
        ranges = self.ranges
        grammar = segment_ebnf(len(self.lines), ranges.next_line, ranges.after_gen, ranges.may_end, scanner.tag,
                               scanner.body if scanner.in_gen else None)
        extra = {"structured_outputs": {"grammar": grammar}, "stop": [COPY_CLOSE], "include_stop_str_in_output": True,
                 "stop_token_ids": sorted(self.tables.stop_ids), **self.sampling}
        start = time.perf_counter()
        self.requests += 1
        self.writer.lookahead = None  # a lookahead refers to this segment's tokens (one only ends one at the limit)
        self.rule_moved = False
        pending: list[int] = []
        finish = None
        stream = self.runtime.stream_completion(self.fed, budget, self.cancelled, **extra)
        try:
            for ids, finish in stream:  # noqa: B007 - read after the loop (a cut at the budget)
                closed = False
                for tok in ids:
                    if tok in self.tables.stop_ids:
                        continue
                    if self.take(tok, pending) or self.matcher.find_jump_forward_string():
                        closed = True  # the client writes what follows (</gen>, a forced literal)
                        break
                yield from self.flush()
                if closed:
                    return "done"
                if self.loop_check():
                    return "loop"
        finally:
            stream.close()  # stop reading: the server aborts a request whose connection is gone
            self.request_s += time.perf_counter() - start
            self.fed.extend(pending)
        if self.cancelled():
            return "cancelled"
        if finish == "length" and not self.matcher.is_terminated() and not self._at_copy_close():
            return "max_tokens"
        if finish is None and not self.matcher.is_terminated() and not self._at_copy_close():
            raise RemoteError(f"{self.runtime.client.display}: the completion ended without a finish reason (truncated)")
        return "done"

    def _at_copy_close(self) -> bool:
        ops, scanner = self.writer.ops, self.writer.scanner
        return bool(ops) and isinstance(ops[-1], CopyLines) and not scanner.in_gen and scanner.tag == ""

    def take(self, tok: int, pending: list[int]) -> bool:
        """Check one server token against the client's grammar, write it, splice a closed copy.

        Returns True when the token showed that a gen line the model began with ``<`` was an op:
        as in the in-process decoder, that ``<`` is rolled back and ``</gen>`` written instead
        (the segment ends there; the server's speculative tokens after it are dropped). Also True
        when the token closed a gen that moved the range rule: the next segment's grammar says
        where a copy may start now."""
        text = self.tables.vocab_texts[tok]
        if self.writer.meant_op(text):
            self.close_gen_instead(pending)
            return True
        self.writer.watch_line_start(text, len(pending))
        if self.matcher.is_terminated() or not self.matcher.accept_token(tok):
            raise RemoteError(f"{self.runtime.client.display}: the server's output left the program grammar "
                              f"at token {tok} ({self.tables.vocab_texts[tok]!r}); is structured output enabled?")
        self.writer.generated += 1
        pending.append(tok)
        self.write([tok], pending)
        moved, self.rule_moved = self.rule_moved, False
        return moved

    def close_gen_instead(self, pending: list[int]) -> None:
        """Drop the ``<`` from the segment's tokens and write ``</gen>`` (engine.decoding.program_writer)."""
        assert self.writer.lookahead is not None
        del pending[self.writer.lookahead.position:]
        ids = self.writer.close_gen(self.matcher)
        pending.extend(ids)
        self.write(ids, pending)

    def take_forced(self) -> None:
        """Every literal the grammar fixes now (``<program><`` at the start, ``<`` after a copy,
        `` lines="`` after ``<copy``...), tokenized on its own and fed by the client exactly as
        the in-process decoder feeds it: a trained selector has only ever seen that tokenization
        (a server left to pick tokens for a literal picks others, and the selector goes astray)."""
        while True:
            literal = accept_forced_literal(self.matcher, self.writer.scanner, self.ranges.must_end)
            if not literal:
                return
            ids = encode(self.tokenizer, literal)
            self.writer.forced += len(ids)
            self.fed.extend(ids)
            self.write(ids, None)

    def write(self, ids: list[int], pending: list[int] | None) -> None:
        for op in self.writer.push(ids):
            text = self.writer.text_of(op)
            if isinstance(op, CopyLines):
                if op.start < self.ranges.next_line or op.end < op.start or op.end > len(self.lines):
                    raise RemoteError(f"{self.runtime.client.display}: the server wrote {op} against the range rule")
                span = [t for line in self.line_ids[op.start - 1:op.end] for t in line]
                (pending if pending is not None else self.fed).extend(span)
                self.writer.copied += len(span)
                self.writer.consumed = max(self.writer.consumed, op.end)
            elif self.ranges.after_gen:
                raise RemoteError(f"{self.runtime.client.display}: the server wrote a gen right after a gen")
            next_line = self.ranges.next_line
            self.ranges.op_finished(op)
            self.rule_moved |= isinstance(op, Gen) and self.ranges.next_line != next_line
            self.writer.record(op, text)
        if self.writer.scanner.finished and not self.ranges.may_end:
            raise RemoteError(f"{self.runtime.client.display}: the server ended the program after "
                              f"{self.writer.ops[-1] if self.writer.ops else 'no op'} before the last input line "
                              f"({len(self.lines)}), against the grammar")

    def loop_check(self) -> bool:
        return self.writer.degenerate()

    def flush(self) -> Iterator[OpResolved]:
        return self.writer.flush()

    def outcome(self, stop_reason: str) -> DecodeOutcome:
        breakdown = {"request_s": round(self.request_s, 6), "requests": self.requests,
                     "decode_steps": self.writer.generated}
        return self.writer.outcome(stop_reason, breakdown)


def decode_text_remote(loaded: LoadedModel, tables: ModelTables, region: str, prompt_ids: Sequence[int],
                       max_new_tokens: int, cancelled: Callable[[], bool],
                       sampling: dict | None = None) -> Iterator[OpResolved | DecodeOutcome]:
    """ar / speculative / pld on the server: one streamed greedy completion (see the module doc)."""
    started = time.perf_counter()
    runtime, tokenizer = loaded.runtime, loaded.tokenizer
    reporter = LineReporter(region, started)
    detok = IncrementalDetokenizer(tokenizer)
    guard, loop_warning = LoopGuard(region), None
    out: list[int] = []
    stop_reason, finish = "done", None
    extra = {"stop": [TEXT_FENCE_CLOSE], "stop_token_ids": sorted(tables.stop_ids), **(sampling or {})}
    for ids, finish in runtime.stream_completion(list(prompt_ids), max_new_tokens, cancelled, **extra):  # noqa: B007 - read after the loop
        new = [t for t in ids if t not in tables.stop_ids]
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
        raise RemoteError(f"{runtime.client.display}: the completion ended without a finish reason (truncated)")
    text = final_text(detok.text, region)
    counts = TokenCounts(len(out), 0, 0)
    yield from reporter.report(text, counts, final=True)
    yield DecodeOutcome(program=Program(merge_adjacent(reporter.ops)), region_output=text, raw_output=detok.text,
                        tokens=counts, stop_reason=stop_reason,
                        breakdown={"request_s": round(time.perf_counter() - started, 6), "requests": 1,
                                   "output_tokens": len(out)},
                        warnings=[loop_warning] if loop_warning else [])
