"""An AI fix that the user's check must accept (``checkCommand``): candidates decoded and checked
in the background, and only one that passes is written.

:class:`CheckedFix` is a :class:`lsp_server.jobs.LiveEdit` whose decode is
:func:`engine.candidates.search_fixes` in the worker: up to ``candidates`` distinct fixes (variants
are decoded until that many change the code and pass the guards), each checked by
the user's command on a temporary copy of the file (progress: "candidate 3 of 8: checking"). A
cancel reaches the search's ``cancelled``, which kills the running check's process group, and
the fix ends with the document as it was: nothing is shown while candidates are checked. The first
candidate that passes goes through the verdict, preview and writer of every edit; the other
candidates stay on offer as the code action "AI fix: next candidate" (:class:`Alternatives`,
:class:`NextCandidate`) while the document is exactly as the fix left it, each checked before it
is written. When none passes nothing is written, and the message quotes the best candidate's check
output (its diff and whole output go to the log).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.candidates import Candidate, CheckOutcome, CheckSpec, Search, run_check, search_fixes
from engine.candidates.check import trimmed
from engine.verdict import NoFix, no_fix
from lsp_server.alternatives import Alternatives, Offer
from lsp_server.document_state import DocumentState
from lsp_server.edits import LiveRegion, minimal_replacement, text_edit, unified_diff, workspace_edit
from lsp_server.jobs import NAMED, NO_FIX, Cancel, LiveEdit
from lsp_server.outcome import Outcome
from lsp_server.progress import WorkDoneProgress
from lsp_server.worker import on_loop, run_blocking
from lsp_server.writer import EditContext, apply_edit

if TYPE_CHECKING:
    from engine.api import EditRequest, Engine
    from engine.decoding.events import EditResult
    from engine.dispatch import ModelFree
    from engine.settings import Settings

NONE_PASSED = ("AI fix: no verified fix found: no candidate passed checkCommand ({tally}); nothing was written. "
               "{best}")
BEST_CHECK = "The best candidate's check {how}:\n{output}"
ALL_REFUSED = "Every candidate was refused before its check: {reasons}."
NO_CANDIDATE = "The model proposed no candidate."
NO_FILE = ("a checked AI fix needs a file on disk: checkCommand runs on a copy of it among its folder's files; "
           "save the buffer first")
NO_NEXT = "AI fix: no other candidate is on offer (the document changed, or no fix with candidates ran here)"
NEXT_FAILED = "AI fix: candidate {number} of {total} failed its check ({how}), so it was not written"
NEXT_APPLIED = "AI fix: candidate {number} of {total} applied: it passed checkCommand (undo reverts it)"
NEXT_LOST = "AI fix: the document changed while candidate {number} was checked; nothing was written"
NEXT_STOPPED = "AI fix: next candidate cancelled; nothing was written"


def check_spec(settings: "Settings", root: Path | None) -> CheckSpec:
    """The user's check as the engine runs it: in the workspace folder (None: the file's), without
    the API key variable the settings name."""
    return CheckSpec(command=settings.check.command, timeout_s=float(settings.check.timeout), cwd=root,
                     secret_env=(settings.backend.api_key_env,))


def how_it_failed(check: CheckOutcome) -> str:
    if check.timed_out:
        return f"ran past its {check.seconds:.0f} s limit"
    return f"exited {check.exit_code}"


def candidate_json(candidate: Candidate) -> dict[str, Any]:
    """One candidate in the command's answer, as ``copy-as-decode edit --json`` lists it, with
    the tail of its check's output."""
    out = candidate.json()
    if candidate.check is not None:
        out["check"] = {**candidate.check.json(), "output": trimmed(candidate.check.output)}
    return out


class CheckedFix(LiveEdit):
    """An AI fix whose candidates the user's check must pass (module docstring)."""

    def __init__(self, ctx: EditContext, uri: str, lines: tuple[int, int] | None, instruction: str,
                 settings: "Settings", cancel: Cancel, *, check: CheckSpec, path: Path,
                 focus_line: int | None = None, focus_policy: str | None = None):
        super().__init__(ctx, uri, lines, instruction, settings, cancel, focus_line=focus_line,
                         focus_policy=focus_policy, kind="fix")
        self.check = check
        self.path = path
        self.search: Search | None = None
        self.alternatives: Alternatives | None = None  # set when a candidate was written

    async def _decode(self, engine: "Engine | ModelFree", request: "EditRequest",
                      live: LiveRegion) -> tuple["EditResult | None", BaseException | None]:
        """The search, in the worker; its passing candidate's result (None when none passed)."""
        await self.progress.begin("AI fix", f"{engine.name} · up to {self.settings.check.candidates} distinct candidates, "
                                  "each checked by checkCommand")
        report = on_loop(self.progress.report)

        def search() -> Search:
            return search_fixes(engine, request, k=self.settings.check.candidates, check=self.check,
                                max_rounds=self.settings.check.max_rounds, file_path=self.path,
                                cancelled=self.cancelled, progress=report)

        try:
            self.search = await run_blocking(search, stop=self.cancel.set)
        except Exception as exc:  # noqa: BLE001 - reported as the edit's failure
            return None, exc
        passed = self.search.passed
        return (passed.result if passed else None), None

    async def _judge(self, live: LiveRegion, result: "EditResult | None", failure: BaseException | None) -> Outcome:
        if self.writer.lost is not None:  # the user changed the document while candidates were checked
            return self._lost()
        if self.cancelled():
            return await self._stopped(live)
        search = self.search
        if failure is not None or search is None:
            return await super()._judge(live, result, failure)
        if search.passed is None:
            outcome = self._none_passed(live, search)
        else:
            outcome = await super()._judge(live, result, None)
            if outcome.status == "done":
                self.alternatives = self._offers(live, search)
        outcome.candidates = [candidate_json(c) for c in search.candidates]
        return outcome

    def advice(self, found: NoFix) -> str:
        named = NAMED.format(example=found.example)
        return f"more candidates or rounds (copyAsDecode.candidates, maxRounds), or {named}"

    def _none_passed(self, live: LiveRegion, search: Search) -> Outcome:
        """Nothing is written: no fix was found (every candidate changed nothing), or none passed."""
        best = search.best
        found = no_fix(best.result) if best is not None else None
        if found is not None and not any(c.result.changed for c in search.candidates):
            return Outcome("unchanged", NO_FIX.format(why=found.why, advice=self.advice(found)))
        if best is not None and best.check is not None:
            name = self.uri.rsplit("/", 1)[-1]
            self.ctx.client.log(f"copy-as-decode: the best unverified candidate for {name} (not written):\n"
                                f"{unified_diff(live.input, live.final_text(best.result.region_output), name)}"
                                f"its check's output:\n{best.check.output}")
            words = BEST_CHECK.format(how=how_it_failed(best.check), output=trimmed(best.check.output))
        elif best is not None and best.refused:
            words = ALL_REFUSED.format(reasons="; ".join(dict.fromkeys(c.refused or "" for c in search.candidates
                                                                       if c.refused)))
        else:
            words = NO_CANDIDATE
        return Outcome("unverified", NONE_PASSED.format(tally=search.words(), best=words))

    def _offers(self, live: LiveRegion, search: Search) -> Alternatives | None:
        """The written candidate first, then every other one not refused, not failed and not the
        same document, in the search's order; None when there is no other."""
        assert search.passed is not None
        written = live.document(live.final_text(search.passed.result.region_output))
        offers = [Offer(written, search.passed.check)]
        for candidate in search.candidates:
            if candidate.refused or (candidate.check is not None and not candidate.check.passed):
                continue
            result = candidate.result
            document = live.document(live.final_text(result.region_output))
            if result.stop_reason == "done" and result.changed and all(o.document != document for o in offers):
                offers.append(Offer(document, candidate.check))
        if len(offers) < 2:
            return None
        return Alternatives(self.uri, offers, self.writer.expected, self.check, self.path)


class NextCandidate:
    """"AI fix: next candidate": the next offer checked (when it was not yet) and written in
    place of the one shown, while the document is as the fix left it. Cancellable like an edit
    (``cancel``, its progress bar); it is the document's running edit (``state``) while its check
    runs."""

    def __init__(self, ctx: EditContext, state: DocumentState, alternatives: Alternatives):
        self.ctx = ctx
        self.state = state
        self.alternatives = alternatives
        self.uri = alternatives.uri
        self.cancel = Cancel()
        self.progress = WorkDoneProgress(ctx.client, cancellable=True)

    @property
    def token(self) -> str | None:
        return self.progress.token

    def cancelled(self) -> bool:
        return self.cancel.is_set() or self.progress.cancelled()

    def current(self) -> bool:
        """The alternatives are still the ones on offer and the document is as they expect."""
        doc = self.ctx.documents.get(self.uri)
        alternatives = self.alternatives
        return (self.state.on_offer(self.uri) is alternatives and doc is not None
                and doc.text == alternatives.expected)

    async def run(self) -> Outcome:
        alternatives = self.alternatives
        while (position := alternatives.following()) is not None:
            offer, number, total = alternatives.offers[position], position + 1, len(alternatives.offers)
            if offer.check is None:
                check = await self._check(offer, number, total)
                if self.cancelled():
                    return Outcome("cancelled", NEXT_STOPPED)
                if not self.current():
                    return Outcome("conflict", NEXT_LOST.format(number=number))
                offer.check = check
                if not check.passed:
                    self.ctx.client.show(NEXT_FAILED.format(number=number, total=total, how=how_it_failed(check)))
                    alternatives.offers.remove(offer)
                    continue
            return await self._write(position)
        return Outcome("error", NO_NEXT)

    async def _check(self, offer: Offer, number: int, total: int) -> CheckOutcome:
        alternatives = self.alternatives
        await self.progress.begin("AI fix: next candidate", f"candidate {number} of {total}: checking")
        started = time.monotonic()
        try:
            return await run_blocking(lambda: run_check(alternatives.check, alternatives.path, offer.document,
                                                        cancelled=self.cancelled), stop=self.cancel.set)
        finally:
            self.progress.end(f"checked in {time.monotonic() - started:.1f} s")

    async def _write(self, position: int) -> Outcome:
        client, alternatives = self.ctx.client, self.alternatives
        doc = self.ctx.documents.get(self.uri)
        offer = alternatives.offers[position]
        if doc is None or not self.current():
            return Outcome("conflict", NEXT_LOST.format(number=position + 1))
        replacement = minimal_replacement(doc.text, offer.document)
        if replacement is None:
            return Outcome("unchanged", NO_NEXT)
        edit = workspace_edit(self.uri, doc.version, text_edit(doc.text, replacement, self.ctx.encoding),
                              client.features.document_changes)
        alternatives.expected, alternatives.shown = offer.document, position  # its echo keeps them on offer
        answer = await apply_edit(client, edit, "AI fix: next candidate")
        if not answer.applied:
            self.state.drop_offer(self.uri)
            return Outcome("rejected", answer.problem)
        return Outcome("done", NEXT_APPLIED.format(number=position + 1, total=len(alternatives.offers)),
                       edits_applied=1)
