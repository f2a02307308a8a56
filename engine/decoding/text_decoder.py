"""Text modes: the model rewrites the region as plain text in a code fence.

* ``ar``: plain greedy decoding, one forward per token (the baseline).
* ``speculative`` (lossless): the engine drafts the continuation from the input at the aligned
  position (:class:`engine.decoding.drafter.InputDrafter`: long drafts, a size schedule), verifies the draft in ONE forward and keeps the longest
  prefix greedy decoding would produce, plus the model's own next token (the loop is
  :class:`engine.decoding.greedy.DraftedDecode`, shared with the OpenAI endpoint). The output is the
  greedy output; only the number of forwards changes.
* ``pld``: transformers' own prompt-lookup decoding (``generate(prompt_lookup_num_tokens=10)``),
  the peer users would pick today.

All three report the output as ops, line by line: a line equal to the input line at the aligned
position is a ``CopyLines``, any other line a ``Gen``; so the editor gets the same event stream.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from engine.checks.guards import LoopGuard
from engine.core.lines import split_lines
from engine.core.modes import traits
from engine.core.tokens import IncrementalDetokenizer, encode
from engine.decoding.drafter import InputDrafter
from engine.decoding.events import OpResolved, TokenCounts
from engine.decoding.greedy import DraftedDecode
from engine.decoding.outcome import DecodeOutcome
from engine.decoding.prompt import TEXT_FENCE_CLOSE
from engine.decoding.tables import ModelTables
from engine.language.program import CopyLines, Gen, Op, Program, merge_adjacent
from engine.runtime.loaded import LoadedModel
from engine.runtime.session import Session


def final_text(raw: str, region: str) -> str:
    """The edited region from the model's raw reply: everything before the closing fence, with the
    region's own choice of final newline."""
    cut = raw.find(TEXT_FENCE_CLOSE)
    body = raw[:cut + 1] if cut >= 0 else raw
    if region and not region.endswith("\n") and body.endswith("\n"):
        body = body[:-1]
    elif (region.endswith("\n") or not region) and body and not body.endswith("\n"):
        body += "\n"
    return body


@dataclass
class LineReporter:
    """Turns the growing raw text into per-line ops, aligned to the input by a moving pointer."""

    region: str
    started: float
    input_lines: list[str] = field(default_factory=list)
    emitted: str = ""
    ops: list[Op] = field(default_factory=list)
    pointer: int = 0  # next input line expected

    def __post_init__(self) -> None:
        self.input_lines = split_lines(self.region)

    def _op_for(self, line: str) -> Op:
        for j in list(range(self.pointer, len(self.input_lines))) + list(range(self.pointer)):
            if self.input_lines[j] == line:
                self.pointer = j + 1
                return CopyLines(j + 1, j + 1)
        return Gen(line)

    def report(self, upto: str, counts: TokenCounts, final: bool = False) -> Iterator[OpResolved]:
        """Emit ops for the complete lines of ``upto`` not emitted yet (all of it when ``final``).
        The last complete line is held back until more text follows: its newline may still be
        dropped by :func:`final_text`."""
        rest = upto[len(self.emitted):]
        lines = split_lines(rest)
        if not final:
            lines = [ln for ln in lines if ln.endswith("\n")][:-1]
        for line in lines:
            op = self._op_for(line)
            self.emitted += line
            self.ops.append(op)
            consumed = self.pointer if isinstance(op, CopyLines) else max(
                (o.end for o in self.ops if isinstance(o, CopyLines)), default=0)
            yield OpResolved(index=len(self.ops) - 1, op=op, text=line, resolved=self.emitted,
                             input_lines_consumed=consumed, tokens=counts,
                             elapsed_s=time.perf_counter() - self.started)


def decode_text(loaded: LoadedModel, tables: ModelTables, region: str, prompt_ids: Sequence[int],
                max_new_tokens: int, cancelled: Callable[[], bool], mode: str, verify: str = "auto",
                draft_source: str | None = None) -> Iterator[OpResolved | DecodeOutcome]:
    """Yield an :class:`OpResolved` per output line, then one :class:`DecodeOutcome` (``verify``:
    how speculative mode's verifies accept a draft, engine.core.choices.Verify). ``draft_source``:
    the text speculative mode drafts from when it is not the region itself (an apply's rewrite
    drafts from the rules' merge, the best prediction of its output); the output is the same greedy
    output whatever the drafts, only the forwards change."""
    started = time.perf_counter()
    if traits(mode).backend_generates:
        yield from _decode_pld(loaded, tables, region, prompt_ids, max_new_tokens, started)
        return
    session = loaded.session()
    session.cancelled = cancelled  # the prompt's prefill stops between chunks (Cancelled)
    session.native_logits = True  # greedy choices on numpy too: no torch on llama.cpp
    try:
        yield from _decode_drafted(loaded, tables, session, region, prompt_ids, max_new_tokens, cancelled, mode,
                                   started, verify, region if draft_source is None else draft_source)
    finally:
        session.close()


def _decode_drafted(loaded: LoadedModel, tables: ModelTables, session: Session, region: str,
                    prompt_ids: Sequence[int], max_new_tokens: int, cancelled: Callable[[], bool], mode: str,
                    started: float, verify: str = "auto", draft_source: str = "",
                    ) -> Iterator[OpResolved | DecodeOutcome]:
    """ar (no drafts) and speculative (drafts from ``draft_source``, verified in one forward each)."""
    tokenizer = loaded.tokenizer
    detok = IncrementalDetokenizer(tokenizer)
    reporter = LineReporter(region, started)
    drafts = traits(mode).drafts_from_input
    drafter = InputDrafter(encode(tokenizer, draft_source), cost=session.cost) if drafts else None
    decode = DraftedDecode(session, prompt_ids, tables.stop_ids, max_new_tokens, drafter, cancelled=cancelled,
                           blocked=tables.text_blocked_ids(), verify=verify)
    guard, loop_warning = LoopGuard(region), None
    for chunk in decode.chunks():
        detok.push(chunk.tokens)
        if chunk.stopped or TEXT_FENCE_CLOSE in detok.text:
            break
        yield from reporter.report(detok.text, TokenCounts(decode.steps, decode.accepted, 0))
        loop_warning = guard.check_when_due(detok.text)
        if loop_warning:
            break
    stop_reason = "loop" if loop_warning else decode.stop_reason or "done"
    generated, copied, out = decode.steps, decode.accepted, decode.out[:max_new_tokens]
    raw = IncrementalDetokenizer(tokenizer)
    raw.push(out)
    text = final_text(raw.text, region)
    yield from reporter.report(text, TokenCounts(generated, copied, 0), final=True)
    breakdown = session.breakdown()
    breakdown["decode_steps"] = generated
    breakdown["output_tokens"] = len(out)
    if drafts:
        breakdown["drafted_tokens"] = decode.accepted + decode.rejected
    yield DecodeOutcome(program=Program(merge_adjacent(reporter.ops)), region_output=text, raw_output=raw.text,
                        tokens=TokenCounts(generated, copied, 0), stop_reason=stop_reason,
                        breakdown=breakdown, warnings=[loop_warning] if loop_warning else [])


def _decode_pld(loaded: LoadedModel, tables: ModelTables, region: str, prompt_ids: Sequence[int],
                max_new_tokens: int, started: float) -> Iterator[OpResolved | DecodeOutcome]:
    tokenizer = loaded.tokenizer
    # The backend's generate() reads the prompt in its first forward (with the first draft it
    # verifies): that forward is the prefill (prefill_s), the others the decode (decode_s).
    with loaded.runtime.meter() as meter:
        out = loaded.runtime.prompt_lookup(list(prompt_ids), max_new_tokens, sorted(tables.stop_ids),
                                           lambda ids: TEXT_FENCE_CLOSE in tokenizer.decode(ids),
                                           tokenizer.eos_token_id, blocked=tables.text_blocked_ids())
    stop_at = next((i for i, tok in enumerate(out) if tok in tables.stop_ids), None)
    out = out[:stop_at] if stop_at is not None else out
    prefill, decode = meter.records[:1], meter.records[1:]
    breakdown = {"prefill_s": round(sum(f.seconds for f in prefill), 6), "prefill_calls": len(prefill),
                 "prefill_forwards": len(prefill), "verify_s": round(sum(f.seconds for f in decode), 6),
                 "verify_calls": len(decode), "output_tokens": len(out)}
    detok = IncrementalDetokenizer(tokenizer)
    detok.push(out)
    text = final_text(detok.text, region)
    counts = TokenCounts(len(out), 0, 0)
    reporter = LineReporter(region, started)
    yield from reporter.report(text, counts, final=True)
    yield DecodeOutcome(program=Program(merge_adjacent(reporter.ops)), region_output=text, raw_output=detok.text,
                        tokens=counts, stop_reason="done" if len(out) < max_new_tokens else "max_tokens",
                        breakdown=breakdown, warnings=[])
