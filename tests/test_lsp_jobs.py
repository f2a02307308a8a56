"""The live edit (lsp_server/jobs.py, lsp_server/writer.py) against a scripted engine and a simulated editor.

The end-to-end tests use the real model, which cannot be steered into every situation (it rarely
edits right after an emoji, and it is never slow on purpose). Here the engine replays scripted
events and the editor is simulated in-process, so each streaming rule is checked exactly: the
positions in every encoding, coalescing behind a slow editor, the user's typing while an edit
is in flight, a missing echo, a closed document, cancel, max_tokens and engine failures.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from fake_client import FakeClient
from lsp_client_positions import client_offset
from lsprotocol import types

from engine.api import EditRequest
from engine.decoding.events import EditFinished, EditResult, EditStarted, OpResolved, TokenCounts
from engine.language.program import Gen, Program
from engine.settings import Settings
from lsp_server import writer
from lsp_server.actions import COMMAND_APPLY_PENDING
from lsp_server.client import ClientFeatures
from lsp_server.documents import DocumentStore
from lsp_server.jobs import LiveEdit
from lsp_server.writer import EditContext

EMOJI = "\U0001F600"
URI = "file:///doc.py"
class FakeEngine:
    """Replays ``states`` [(resolved, input_lines_consumed)] then finishes with ``output``."""

    name = "fake"

    def __init__(self, states, output: str, stop_reason: str = "done", delay: float = 0.0,
                 fail_at: int | None = None, warnings: list[str] | None = None):
        self.states, self.output, self.stop_reason = states, output, stop_reason
        self.delay, self.fail_at, self.warnings = delay, fail_at, warnings or []
        self.steps_after_cancel = 0

    def resolve_mode(self, mode: str, apply: bool = False, one_shot_lines: int | None = None) -> str:
        return "program" if mode == "auto" else mode  # as the real engine with a selector

    def stream(self, request, cancelled):
        region = request.text
        yield EditStarted(mode=request.mode, model="fake", input_lines=region.count("\n"), prompt_tokens=10)
        stop = self.stop_reason
        for index, (resolved, consumed) in enumerate(self.states):
            if cancelled():
                stop = "cancelled"
                break
            if self.fail_at == index:
                raise RuntimeError("the fake engine broke")
            time.sleep(self.delay)
            yield OpResolved(index=index, op=Gen(resolved), text=resolved, resolved=resolved,
                             input_lines_consumed=consumed, tokens=TokenCounts(generated=index + 1, copied=3),
                             elapsed_s=0.0)
        output = region if stop == "cancelled" else self.output
        yield EditFinished(EditResult(
            mode=request.mode, model="fake", input_text=region, output_text=output, region=None,
            region_input=region, region_output=output, program=Program(()), raw_output="",
            tokens=TokenCounts(generated=len(self.states), copied=3), prompt_tokens=10, stop_reason=stop,
            warnings=list(self.warnings)))
        self.request = request


class FakeEditor(FakeClient):
    """An editor: applies the server's edits in ``encoding`` units, answers, then echoes them
    back as didChange (after ``echo_delay`` s; never when ``echo`` is False)."""

    def __init__(self, store: DocumentStore, text: str, encoding: str, answer_delay: float = 0.0,
                 echo: bool = True, echo_delay: float = 0.0):
        super().__init__()
        self.store, self.encoding = store, encoding
        self.text, self.version = text, 1
        self.answer_delay, self.echo, self.echo_delay = answer_delay, echo, echo_delay
        self.edits: list[types.TextEdit] = []
        self.states: list[str] = []
        self.decline = False  # answer the next applyEdit with applied=False (the user said no)
        self.after_apply = None
        store.open(types.TextDocumentItem(uri=URI, language_id="python", version=1, text=text))

    def _send_change(self, rng, new_text, version):
        self.store.change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=rng, text=new_text)]))

    def user_types(self, offset: int, new_text: str) -> None:
        from lsp_server.positions import LineIndex

        rng = LineIndex(self.text).range_at(offset, offset, self.encoding)
        self.text = self.text[:offset] + new_text + self.text[offset:]
        self.version += 1
        self._send_change(rng, new_text, self.version)

    async def apply_workspace_edit(self, params: types.ApplyWorkspaceEditParams):
        await asyncio.sleep(self.answer_delay)
        self.sent.append(params)
        if self.decline:
            return types.ApplyWorkspaceEditResult(applied=False)
        change = (params.edit.document_changes or [None])[0]
        edit = change.edits[0] if change is not None else params.edit.changes[URI][0]
        if change is not None and change.text_document.version != self.version:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason="version mismatch")
        start = client_offset(self.text, edit.range.start, self.encoding)
        end = client_offset(self.text, edit.range.end, self.encoding)
        self.text = self.text[:start] + edit.new_text + self.text[end:]
        self.version += 1
        self.edits.append(edit)
        self.states.append(self.text)
        if self.echo:
            version = self.version
            asyncio.get_running_loop().call_later(self.echo_delay, self._send_change, edit.range, edit.new_text,
                                                  version)
        if self.after_apply is not None:
            self.after_apply(self)
        return types.ApplyWorkspaceEditResult(applied=True)


def make_edit(editor: FakeEditor, store: DocumentStore, encoding: str, apply_mode: str = "stream",
              document_changes: bool = True, instruction: str = "Make it upper case", annotations: bool = False,
              focus_line: int | None = None) -> LiveEdit:
    """An edit under test. The default instruction is not a fix, so the scripted rewrites of every
    line are not held back as destructive (the guard-rail tests below pass "Fix the bug")."""
    editor.features = ClientFeatures(work_done_progress=True, document_changes=document_changes,
                                     review=annotations)
    ctx = EditContext(client=editor, documents=store, encoding=encoding)
    return LiveEdit(ctx, URI, None, instruction, Settings(mode="ar", apply_mode=apply_mode), focus_line=focus_line)


def setup(text: str, encoding: str = "utf-16", **editor_options):
    store = DocumentStore(encoding)  # type: ignore[arg-type]
    editor = FakeEditor(store, text, encoding, **editor_options)
    return store, editor


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8", "utf-32"])
@pytest.mark.parametrize("document_changes", [True, False])
async def test_edits_after_astral_characters_land_exactly(encoding, document_changes):
    text = f"s = '{EMOJI}\u4e2d' - 1  # {EMOJI}\nt = 'e\u0301'\n"
    output = f"s = '{EMOJI}\u4e2d' + '1'  # {EMOJI}\nt = 'e\u0301!'\n"
    out_lines = output.splitlines(keepends=True)
    engine = FakeEngine([(out_lines[0], 1), (output, 2)], output)
    store, editor = setup(text, encoding)
    outcome = await make_edit(editor, store, encoding, document_changes=document_changes).run(engine)
    assert outcome.status == "done", outcome
    assert editor.text == output and store.get(URI).text == output
    # the first edit starts after the emoji and the CJK character of line 0
    first = editor.edits[0].range.start
    assert first.line == 0 and first.character == {"utf-16": 10, "utf-8": 14, "utf-32": 9}[encoding]


async def test_a_slow_editor_gets_coalesced_edits():
    text = "".join(f"line {i}\n" for i in range(12))
    output = "".join(f"LINE {i}\n" for i in range(12))
    states = [("".join(f"LINE {i}\n" for i in range(k)), k) for k in range(1, 13)]
    store, editor = setup(text, answer_delay=0.05, echo_delay=0.05)
    outcome = await make_edit(editor, store, "utf-16").run(FakeEngine(states, output, delay=0.005))
    assert outcome.status == "done" and editor.text == output
    assert 1 <= len(editor.edits) < len(states), "events were not coalesced behind the slow editor"
    progress = editor.work_done_progress.values
    assert isinstance(progress[0], types.WorkDoneProgressBegin) and progress[0].cancellable
    assert isinstance(progress[-1], types.WorkDoneProgressEnd)
    reports = [v for v in progress if isinstance(v, types.WorkDoneProgressReport)]
    assert reports[-1].percentage == 100 and "copied" in reports[-1].message


async def test_echo_after_the_answer_is_waited_for():
    """Neovim answers applyEdit first and sends didChange ~150 ms later."""
    text = "a\nb\nc\n"
    output = "A\nB\nC\n"
    states = [("A\n", 1), ("A\nB\n", 2)]
    store, editor = setup(text, echo_delay=0.15)
    outcome = await make_edit(editor, store, "utf-16", document_changes=False).run(FakeEngine(states, output))
    assert outcome.status == "done" and editor.text == output == store.get(URI).text


async def test_typing_while_an_edit_is_in_flight_stops_without_touching_the_text():
    text = "a\nb\nc\nd\n"
    output = "A\nB\nC\nD\n"
    states = [("A\n", 1), ("A\nB\n", 2), ("A\nB\nC\n", 3)]
    store, editor = setup(text)
    editor.after_apply = lambda ed: ed.user_types(len(ed.text), "typed\n") if len(ed.edits) == 1 else None
    outcome = await make_edit(editor, store, "utf-16").run(FakeEngine(states, output, delay=0.05))
    assert outcome.status == "conflict" and "document changed" in outcome.message
    assert len(editor.edits) == 1
    assert editor.text == "A\nb\nc\nd\ntyped\n" == store.get(URI).text


async def test_typing_between_edits_cancels_decoding():
    text = "a\nb\nc\nd\n"
    states = [("A\n", 1), ("A\nB\n", 2), ("A\nB\nC\n", 3), ("A\nB\nC\nD\n", 4)]
    store, editor = setup(text)
    engine = FakeEngine(states, "A\nB\nC\nD\n", delay=0.3)
    edit = make_edit(editor, store, "utf-16")
    task = asyncio.ensure_future(edit.run(engine))
    while not editor.edits:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    editor.user_types(0, "# ")
    outcome = await task
    assert outcome.status == "conflict"
    assert edit.cancelled(), "decoding was not cancelled"
    assert outcome.summary["stop_reason"] == "cancelled"
    assert editor.text == "# A\nb\nc\nd\n"


async def test_a_cancelled_request_stops_decoding():
    """The command's task cancelled (the server exits, the client cancels the request): the engine
    stops within a step, so its executor thread does not hold the process."""
    store, editor = setup("a\nb\nc\n")
    edit = make_edit(editor, store, "utf-16")
    task = asyncio.ensure_future(edit.run(FakeEngine([("A\n", 1), ("A\nB\n", 2), ("A\nB\nC\n", 3)], "A\nB\nC\n",
                                                     delay=0.3)))
    while not editor.edits:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert edit.cancelled()


async def test_a_request_cancelled_while_its_edit_awaits_the_echo_stops_decoding():
    """The cancel lands in the consumer's own await (the writer waiting for the editor's echo),
    not in the stream's wait: the stream is closed at once and the engine told to stop."""
    store, editor = setup("a\nb\nc\n", echo_delay=0.5)
    engine = FakeEngine([("A\n", 1), ("A\nB\n", 2), ("A\nB\nC\n", 3)], "A\nB\nC\n", delay=0.05)
    edit = make_edit(editor, store, "utf-16")
    task = asyncio.ensure_future(edit.run(engine))
    while not editor.edits:  # the first edit is applied; its echo is 0.5 s away
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert edit.cancelled()


async def test_a_missing_echo_stops(monkeypatch):
    monkeypatch.setattr(writer, "ECHO_TIMEOUT_S", 0.5)
    store, editor = setup("a\nb\n", echo=False)
    outcome = await make_edit(editor, store, "utf-16").run(FakeEngine([("A\n", 1)], "A\nB\n"))
    assert outcome.status == "conflict" and "did not report the applied edit back" in outcome.message


async def test_version_mismatch_is_reported_as_a_conflict():
    store, editor = setup("a\nb\n")
    editor.version = 7  # the editor moved on without telling the server
    outcome = await make_edit(editor, store, "utf-16").run(FakeEngine([("A\n", 1)], "A\nB\n"))
    assert outcome.status == "rejected" and "version mismatch" in outcome.message
    assert editor.text == "a\nb\n"


async def test_closing_the_document_stops():
    store, editor = setup("a\nb\nc\n")
    editor.after_apply = lambda ed: store.close(URI)
    outcome = await make_edit(editor, store, "utf-16").run(
        FakeEngine([("A\n", 1), ("A\nB\n", 2)], "A\nB\nC\n", delay=0.05))
    assert outcome.status == "closed"


async def test_cancel_restores_the_region_in_one_edit():
    text = "a\nb\nc\nd\n"
    states = [("A\n", 1), ("A\nB\n", 2), ("A\nB\nC\n", 3), ("A\nB\nC\nD\n", 4)]
    store, editor = setup(text)
    edit = make_edit(editor, store, "utf-16")
    editor.after_apply = lambda ed: edit.cancel.set() if len(ed.edits) == 2 else None
    outcome = await edit.run(FakeEngine(states, "A\nB\nC\nD\n", delay=0.05))
    assert outcome.status == "cancelled" and "restored" in outcome.message
    assert editor.text == text and len(editor.edits) == 3


async def test_progress_cancel_is_honoured():
    store, editor = setup("a\nb\nc\n")
    edit = make_edit(editor, store, "utf-16")

    def cancel_from_the_progress_ui(ed):
        ed.work_done_progress.tokens[edit.token].cancel()  # what pygls does on window/workDoneProgress/cancel

    editor.after_apply = lambda ed: cancel_from_the_progress_ui(ed) if len(ed.edits) == 1 else None
    outcome = await edit.run(FakeEngine([("A\n", 1), ("A\nB\n", 2), ("A\nB\nC\n", 3)], "A\nB\nC\n", delay=0.05))
    assert outcome.status == "cancelled" and editor.text == "a\nb\nc\n"


@pytest.mark.parametrize("apply_mode", ["stream", "final"])
async def test_max_tokens_leaves_the_document_unchanged(apply_mode):
    store, editor = setup("a\nb\n")
    outcome = await make_edit(editor, store, "utf-16", apply_mode).run(
        FakeEngine([("A\n", 1), ("A\nB\nB\nB\n", 2)], "A\nB\nB\nB\n", stop_reason="max_tokens"))
    assert outcome.status == "max_tokens" and "maxNewTokens" in outcome.message
    assert editor.text == "a\nb\n"
    if apply_mode == "final":
        assert not editor.edits


async def test_engine_failure_restores_and_reports():
    store, editor = setup("a\nb\n")
    outcome = await make_edit(editor, store, "utf-16").run(
        FakeEngine([("A\n", 1), ("A\nB\n", 2)], "A\nB\n", fail_at=1))
    assert outcome.status == "error" and "the fake engine broke" in outcome.message
    assert editor.text == "a\nb\n"


async def test_final_mode_sends_one_edit():
    store, editor = setup("a\nb\nc\n")
    outcome = await make_edit(editor, store, "utf-16", "final").run(
        FakeEngine([("A\n", 1), ("A\nB\n", 2)], "A\nB\nc\n"))
    assert outcome.status == "done" and len(editor.edits) == 1 and editor.text == "A\nB\nc\n"


async def test_the_engine_runs_off_the_event_loop():
    store, editor = setup("a\nb\n")
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    tick_task = asyncio.ensure_future(ticker())
    outcome = await make_edit(editor, store, "utf-16").run(FakeEngine([("A\n", 1)], "A\nB\n", delay=0.4))
    tick_task.cancel()
    assert outcome.status == "done" and ticks >= 10, "the event loop was blocked while decoding"
    assert threading.active_count() >= 1


# --- guard rails: loops, destructive edits, previews -------------------------------------------

FUNCTION = "def f(x):\n    y = x * 2\n    z = y - 1\n    w = z * z\n    v = w + y\n    return v\n"
GUTTED = "def f(x):\n    return x\n"                     # a "fix" that deletes 4 of 6 lines
SMALL_FIX = FUNCTION.replace("y - 1", "y + 1")


async def test_a_loop_stop_restores_the_region_with_the_guard_message():
    store, editor = setup("a\nb\n")
    why = "the output is repeating itself: 'B' 9 times in a row (a degenerate loop the input does not have); stopped early"
    outcome = await make_edit(editor, store, "utf-16").run(
        FakeEngine([("A\n", 1), ("A\nB\nB\nB\n", 2)], "A\nB\nB\nB\n", stop_reason="loop", warnings=[why]))
    assert outcome.status == "loop" and why in outcome.message and "left unchanged" in outcome.message
    assert editor.edits and editor.text == "a\nb\n" == store.get(URI).text


@pytest.mark.parametrize("annotations", [True, False])
async def test_a_destructive_fix_is_held_back_and_never_applied_silently(annotations):
    store, editor = setup(FUNCTION)
    states = [("def f(x):\n    y = x + 2\n", 2), (GUTTED, 6)]  # a harmless step, then the damage
    edit = make_edit(editor, store, "utf-16", instruction="Fix the bug", annotations=annotations)
    outcome = await edit.run(FakeEngine(states, GUTTED, delay=0.02))
    assert len(editor.edits) == 2 and editor.states[0] != FUNCTION, "the harmless step was not streamed"
    assert editor.text == FUNCTION == store.get(URI).text, "the destructive state reached the editor"
    assert outcome.damage["deleted"] == 4 and outcome.summary["stop_reason"] == "done"
    if not annotations:  # Neovim: a message and a pending edit for applyPending
        assert outcome.status == "pending" and outcome.review is None
        assert "would rewrite 1 and delete 4 of 6 lines for a fix" in outcome.message
        assert COMMAND_APPLY_PENDING in outcome.message
        assert outcome.pending.before == FUNCTION and outcome.pending.after == GUTTED
        return
    assert outcome.status == "preview" and outcome.pending is None
    answer = await outcome.review()
    assert answer.status == "done" and editor.text == GUTTED
    sent = editor.sent[-1].edit
    (change,) = sent.document_changes
    (annotated,) = change.edits
    assert isinstance(annotated, types.AnnotatedTextEdit)
    note = sent.change_annotations[annotated.annotation_id]
    assert note.needs_confirmation is True and "would rewrite 1 and delete 4 of 6 lines" in note.label


async def test_a_declined_preview_leaves_the_document():
    store, editor = setup(FUNCTION)
    outcome = await make_edit(editor, store, "utf-16", "final", instruction="Fix the bug", annotations=True).run(
        FakeEngine([(GUTTED, 6)], GUTTED))
    editor.decline = True
    answer = await outcome.review()
    assert answer.status == "declined" and editor.text == FUNCTION and not editor.edits


async def test_a_transient_destructive_state_that_recovers_is_applied():
    store, editor = setup(FUNCTION)
    states = [("def f(x):\n", 5), (SMALL_FIX, 6)]  # live text "skips" lines 2-5 for a moment
    outcome = await make_edit(editor, store, "utf-16", instruction="Fix the bug").run(FakeEngine(states, SMALL_FIX))
    assert outcome.status == "done" and editor.text == SMALL_FIX
    assert all(state.count("\n") >= 5 for state in editor.states), editor.states


@pytest.mark.parametrize("annotations", [True, False])
async def test_apply_mode_preview_sends_even_a_small_fix_for_review(annotations):
    store, editor = setup(FUNCTION)
    edit = make_edit(editor, store, "utf-16", "preview", instruction="Fix the bug", annotations=annotations,
                   focus_line=3)
    engine = FakeEngine([("def f(x):\n", 1), (SMALL_FIX, 6)], SMALL_FIX)
    outcome = await edit.run(engine)
    assert engine.request.focus_line == 3
    assert not editor.edits and editor.text == FUNCTION, "preview mode streamed into the document"
    assert outcome.status == ("preview" if annotations else "pending") and "applyMode is preview" in outcome.message
    if annotations:
        assert (await outcome.review()).status == "done" and editor.text == SMALL_FIX
    else:
        assert outcome.pending.after == SMALL_FIX


# A one-line "fix" that drops the body's indentation: a small edit, not destructive, but the
# document no longer parses (the embedded model does this kind of thing: tests/test_edit_cli.py).
UNINDENTED = FUNCTION.replace("    return v\n", "return v\n")


@pytest.mark.parametrize("annotations", [True, False])
async def test_an_edit_that_breaks_the_syntax_goes_to_review(annotations):
    store, editor = setup(FUNCTION)
    edit = make_edit(editor, store, "utf-16", instruction="Fix the bug", annotations=annotations)
    outcome = await edit.run(FakeEngine([("def f(x):\n", 1), (UNINDENTED, 6)], UNINDENTED, delay=0.02))
    assert editor.text == FUNCTION == store.get(URI).text, "a syntax-breaking edit reached the document"
    assert outcome.syntax["breaks"] is True and outcome.syntax["error"]["line"] == 6
    assert outcome.json()["syntax"] == outcome.syntax
    assert "it would break the python syntax (line 6, column 1:" in outcome.message
    if not annotations:  # Neovim: a message and a pending edit for applyPending
        assert outcome.status == "pending" and outcome.pending.after == UNINDENTED
        return
    assert outcome.status == "preview"
    answer = await outcome.review()
    assert answer.status == "done" and editor.text == UNINDENTED
    sent = editor.sent[-1].edit
    (annotated,) = sent.document_changes[0].edits
    note = sent.change_annotations[annotated.annotation_id]
    assert note.needs_confirmation is True and "would break the python syntax" in note.label


FAR_FIX = FUNCTION.replace("x * 2", "x * 3")  # a fix of line 2, scripted with the cursor beyond the radius


@pytest.mark.parametrize("annotations", [True, False])
async def test_a_fix_far_from_the_cursor_goes_to_review(annotations):
    from engine.checks.guards import FOCUS_RADIUS

    store, editor = setup(FUNCTION)
    cursor = 2 + FOCUS_RADIUS + 1
    edit = make_edit(editor, store, "utf-16", instruction="Fix the bug", annotations=annotations, focus_line=cursor)
    outcome = await edit.run(FakeEngine([("def f(x):\n    y = x * 3\n", 2), (FAR_FIX, 6)], FAR_FIX))
    assert editor.text == FUNCTION == store.get(URI).text, "a fix far from the cursor stayed in the document"
    where = f"it edits lines 2-2, far from line {cursor} where you pointed"
    assert where in outcome.message and outcome.far == {"lines": [2, 2], "focus": cursor, "radius": FOCUS_RADIUS}
    assert outcome.json()["farFromFocus"] == outcome.far
    if not annotations:  # Neovim: a message and a pending edit for applyPending
        assert outcome.status == "pending" and outcome.pending.after == FAR_FIX and COMMAND_APPLY_PENDING in outcome.message
        return
    assert outcome.status == "preview"
    answer = await outcome.review()
    assert answer.status == "done" and editor.text == FAR_FIX
    sent = editor.sent[-1].edit
    (annotated,) = sent.document_changes[0].edits
    note = sent.change_annotations[annotated.annotation_id]
    assert note.needs_confirmation is True and where in note.label


@pytest.mark.parametrize("cursor", [True, False])
async def test_a_fix_near_the_cursor_or_without_one_is_applied(cursor):
    """Within the radius of the cursor (the edge included), or with no cursor (a selection), no rule holds it."""
    from engine.checks.guards import FOCUS_RADIUS

    store, editor = setup(FUNCTION)
    line = 2 + FOCUS_RADIUS if cursor else None
    outcome = await make_edit(editor, store, "utf-16", instruction="Fix the bug", focus_line=line).run(
        FakeEngine([(FAR_FIX, 6)], FAR_FIX))
    assert outcome.status == "done" and editor.text == FAR_FIX and outcome.far is None


async def test_an_edit_that_parses_is_applied_with_its_verdict():
    store, editor = setup(FUNCTION)
    outcome = await make_edit(editor, store, "utf-16", instruction="Fix the bug").run(
        FakeEngine([(SMALL_FIX, 6)], SMALL_FIX))
    assert outcome.status == "done" and editor.text == SMALL_FIX
    assert outcome.syntax == {"language": "python", "parsed_before": True, "parses_after": True, "breaks": False,
                              "error": None, "note": None}


async def test_a_document_that_did_not_parse_is_not_held_for_its_syntax():
    broken = FUNCTION.replace("def f(x):", "def f(x:")
    fixed = broken.replace("y - 1", "y + 1")
    store, editor = setup(broken)
    outcome = await make_edit(editor, store, "utf-16", instruction="Fix the bug").run(FakeEngine([(fixed, 6)], fixed))
    assert outcome.status == "done" and editor.text == fixed
    assert outcome.syntax["parsed_before"] is False and outcome.syntax["breaks"] is False


async def _request_sent(settings: Settings, **options: object) -> EditRequest:
    """The EditRequest a live edit under ``settings`` gives the engine (a FakeEngine that upper-cases
    a two-line document; the edit must end done)."""
    store, editor = setup("a\nb\n")
    ctx = EditContext(client=editor, documents=store, encoding="utf-16")
    engine = FakeEngine([("A\nB\n", 2)], "A\nB\n")
    outcome = await LiveEdit(ctx, URI, None, "Make it upper case", settings, **options).run(engine)
    assert outcome.status == "done"
    return engine.request


@pytest.mark.parametrize("style", ["few-shot", "selector"])
async def test_prompt_style_setting_reaches_the_edit_request(tmp_path, style):
    """promptStyle as the client sends it (user settings), through the server's config, to the
    engine's EditRequest.prompt_style."""
    from engine.settings import load_workspace_settings

    settings, warnings = load_workspace_settings(tmp_path / "doc.py", user={"copyAsDecode": {"promptStyle": style}})
    assert not warnings and settings.edit.prompt_style == style
    assert (await _request_sent(settings)).prompt_style == style


@pytest.mark.parametrize("rule", ["exact", "argmax"])
async def test_verify_setting_reaches_the_edit_request(tmp_path, rule):
    """verify from a workspace file, through the server's config, to EditRequest.verify; a value
    that is not a rule is skipped with a message naming the key."""
    from engine.settings import load_workspace_settings, parse_layer

    (tmp_path / ".copy-as-decode.toml").write_text(f'verify = "{rule}"\n')
    settings, warnings = load_workspace_settings(tmp_path / "doc.py")
    assert not warnings and settings.edit.verify == rule
    assert (await _request_sent(settings)).verify == rule
    layer = parse_layer({"verify": "fast"}, "test")
    assert "verify" not in layer.values and any("verify" in w and "fast" in w for w in layer.warnings)


@pytest.mark.parametrize("source, policy", [("diagnostic", "keep"), ("cursor", "hold")])
async def test_a_diagnostic_focus_is_kept_and_a_cursor_gets_the_default_policy(source, policy):
    """AI fix's focus from the code action's argument to the engine's EditRequest.focus_policy."""
    from lsp_server.actions import EditArgs

    args = EditArgs.parse({"uri": URI, "kind": "fix", "focus": {"line": 2, "character": 0, "source": source}})
    request = await _request_sent(Settings(mode="ar"), focus_line=2, focus_policy=args.focus_policy)
    assert request.focus_policy == policy


class RecordingEngine(FakeEngine):
    """A FakeEngine the CLI can load too; it records every request and leaves the text as it is
    (so the edit sends the editor nothing)."""

    requests: list = []

    def __init__(self):
        super().__init__([], "")

    @classmethod
    def load(cls, model, **kwargs):
        return cls()

    def model_for(self, mode):
        from types import SimpleNamespace

        return SimpleNamespace(runtime=SimpleNamespace(describe=lambda: "a recording fake"))

    def stream(self, request, cancelled=None):
        from engine.core.lines import split_lines

        self.requests.append(request)
        a, b = request.region_bounds()
        region = "".join(split_lines(request.text)[a:b])
        yield EditStarted(mode=request.mode, model="fake", input_lines=b - a, prompt_tokens=10)
        yield EditFinished(EditResult(
            mode=request.mode, model="fake", input_text=request.text, output_text=request.text, region=request.lines,
            region_input=region, region_output=region, program=Program(()), raw_output="", tokens=TokenCounts(),
            prompt_tokens=10, stop_reason="done"))


@pytest.mark.parametrize("name,language_id,language", [
    ("doc.py", "python", "python"), ("app.jsx", "javascriptreact", "jsx"), ("view.tsx", "typescriptreact", "tsx"),
    ("run.sh", "shellscript", "bash"), ("run.sh", "sh", "bash"), ("main.go", "go", "go"), ("notes.txt", "plaintext", "")])
async def test_the_request_is_the_clis_for_the_same_file(tmp_path, monkeypatch, capsys, name, language_id, language):
    """The editor's request for a buffer equals the CLI's for the same file, its
    language (the prompt's fence tag and the syntax check) included: the editor's languageId
    (VS Code's, Neovim's filetype) maps to the fence name the CLI takes from the suffix."""
    import engine.commands.edit as edit_command
    from engine.cli import main
    from engine.settings import load_workspace_settings
    from engine.verdict import EXIT_NO_FIX

    text = "a = 1\nb = 2\nc = 3\n"
    path = tmp_path / name
    path.write_text(text)
    (tmp_path / ".copy-as-decode.toml").write_text('mode = "ar"\nmax_new_tokens = 40\ncontext_lines = 1\n')
    monkeypatch.setattr(edit_command, "Engine", RecordingEngine)
    RecordingEngine.requests = []
    code = main(["edit", str(path), "-i", "Make it upper case", "--lines", "2-3", "--focus", "2", "--json"])
    assert code == EXIT_NO_FIX, capsys.readouterr().err  # the recording engine keeps the text
    cli_request = RecordingEngine.requests[-1]

    store = DocumentStore("utf-16")
    store.open(types.TextDocumentItem(uri=path.as_uri(), language_id=language_id, version=1, text=text))
    settings, warnings = load_workspace_settings(path)  # as the server reads the workspace's settings
    assert not warnings
    ctx = EditContext(client=FakeClient(ClientFeatures(document_changes=True)), documents=store, encoding="utf-16")
    engine = RecordingEngine()
    outcome = await LiveEdit(ctx, path.as_uri(), (2, 3), "Make it upper case", settings, focus_line=2).run(engine)
    assert outcome.status == "unchanged", outcome
    assert engine.requests[-1].language == language == cli_request.language
    assert engine.requests[-1] == cli_request


async def test_an_unsaved_buffer_takes_its_language_from_the_editor():
    """No suffix (VS Code's untitled buffers): the languageId alone names the language, for the
    prompt and for the syntax check of the result."""
    store = DocumentStore("utf-16")
    store.open(types.TextDocumentItem(uri="untitled:Untitled-1", language_id="python", version=1, text="x = 1\n"))
    ctx = EditContext(client=FakeClient(ClientFeatures(document_changes=True)), documents=store, encoding="utf-16")
    engine = RecordingEngine()
    edit = LiveEdit(ctx, "untitled:Untitled-1", None, "Make it upper case", Settings(mode="ar"))
    outcome = await edit.run(engine)
    assert outcome.status == "unchanged" and engine.requests[-1].language == edit.language == "python"


def test_prompt_styles_are_the_engines():
    """The setting's values (also VS Code's enum, tests/test_vscode_client.py) are exactly the
    values EditRequest.prompt_style takes."""
    import typing

    from engine.api import EditRequest
    from engine.core.choices import PROMPT_STYLES
    from engine.settings import ConfigError, check_value

    assert PROMPT_STYLES == typing.get_args(typing.get_type_hints(EditRequest)["prompt_style"])
    with pytest.raises(ConfigError, match="few-shot, selector"):
        check_value("prompt_style", "text")


async def test_an_ai_fix_that_changes_nothing_says_no_fix_was_found():
    """The same unchanged result: an AI fix says no fix was found, why and what to try (a fake:
    the real model's case is in tests/test_lsp_candidates.py); an AI edit says it as before."""
    store = DocumentStore("utf-16")
    store.open(types.TextDocumentItem(uri=URI, language_id="python", version=1, text="x = 1\n"))
    ctx = EditContext(client=FakeClient(ClientFeatures(document_changes=True)), documents=store, encoding="utf-16")
    fix = await LiveEdit(ctx, URI, None, "Fix the bug", Settings(mode="ar"), kind="fix").run(RecordingEngine())
    assert fix.status == "unchanged" and fix.message.startswith("AI fix: no fix found: the model copied every line")
    assert "checkCommand" in fix.message and "instruction that names the problem" in fix.message
    edit = await LiveEdit(ctx, URI, None, "Make it upper case", Settings(mode="ar")).run(RecordingEngine())
    assert edit.status == "unchanged" and edit.message.startswith("AI edit: the model left the code unchanged")
