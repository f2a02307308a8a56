"""The bodies of the server's commands (``workspace/executeCommand``), on the server's services.

Each takes the command's raw arguments (the list the client sent), refuses a malformed one with
an error message, and answers the command's JSON: ``copyAsDecode.server.edit`` and
``copyAsDecode.server.applyUpdate`` run an :class:`lsp_server.session.EditSession`;
``copyAsDecode.server.nextCandidate`` writes a checked fix's next candidate;
``copyAsDecode.server.applyPending`` applies the edit held for review;
``copyAsDecode.server.cancel`` stops running and queued edits; ``copyAsDecode.server.settings``
answers the effective settings (with ``doctor``, also ``copy-as-decode doctor``'s report).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from lsprotocol import types

from engine.settings import Settings
from engine.workspace_apply import names_files, update_for_document
from lsp_server.actions import (
    COMMAND_APPLY_PENDING,
    COMMAND_CANCEL,
    COMMAND_NEXT_CANDIDATE,
    COMMAND_SETTINGS,
    EditArgs,
    flag_argument,
    next_candidate_action,
    uri_argument,
)
from lsp_server.answers import run_answer
from lsp_server.client import fail, report
from lsp_server.documents import path_of
from lsp_server.edits import minimal_replacement, text_edit, workspace_edit
from lsp_server.models import ModelKey
from lsp_server.outcome import Outcome
from lsp_server.services import EditServices
from lsp_server.session import EditSession
from lsp_server.verified import NO_NEXT, NextCandidate
from lsp_server.writer import apply_edit

NOT_OPEN = ("{uri} is not open in the editor; open it first (edits apply to the editor's buffer, not to the file "
            "on disk)")
NO_INSTRUCTION = ("an instruction is needed for \"AI edit\": pass it in the command's 'instruction' field "
                  "(editors prompt for it)")
NOTHING_PENDING = "no AI edit is waiting to be applied"
PENDING_DROPPED = ("the document changed since the AI edit was computed, so it was dropped; run the AI edit "
                   "again")
NOTHING_TO_APPLY = "AI edit: nothing to apply"
PENDING_APPLIED = "AI edit applied ({reason})"
BUSY = "an AI edit is already running for this document; wait for it or cancel it"


async def run_edit(services: EditServices, raw: Any) -> dict:
    """``copyAsDecode.server.edit``: a valid request runs as an :class:`EditSession`."""
    try:
        args = EditArgs.parse(raw)
    except ValueError as exc:
        return fail(services.client, str(exc))
    if services.documents.get(args.uri) is None:
        return fail(services.client, NOT_OPEN.format(uri=args.uri))
    if not args.instruction:
        return fail(services.client, NO_INSTRUCTION)
    services.state.drop_pending(args.uri)  # a new request replaces an edit held for review
    services.state.drop_offer(args.uri)  # ... and a checked fix's other candidates
    return await EditSession(services, args).run()


async def run_apply(services: EditServices, raw: Any) -> dict:
    """``copyAsDecode.server.applyUpdate``: the update merged into the whole document, played
    in as an :class:`EditSession` like any edit (streaming, preview, undo, cancel); an update
    that names files (a chat answer with paths, a diff) is merged into each of them and sent as
    one edit (:mod:`lsp_server.answers`)."""
    try:
        args = EditArgs.parse_apply(raw)
    except ValueError as exc:
        return fail(services.client, str(exc))
    if args.update and names_files(args.update):
        single = one_document_update(services, args)
        if single is None:
            return await run_answer(services, args)
        args = replace(args, update=single)
    if services.documents.get(args.uri) is None:
        return fail(services.client, NOT_OPEN.format(uri=args.uri))
    services.state.drop_pending(args.uri)
    return await EditSession(services, args).run()


def one_document_update(services: EditServices, args: EditArgs) -> str | None:
    """The update for the document itself when the answer's one block is headed by its path (or
    its name): then the apply streams in as any apply does; None for an answer for other files."""
    path = path_of(args.uri)
    if path is None or args.update is None:
        return None
    return update_for_document(args.update, services.settings.root_for(path) or path.parent, path)


async def next_candidate(services: EditServices, raw: Any) -> dict:
    """``copyAsDecode.server.nextCandidate``: write the checked fix's next candidate, checked
    first when it was not yet, while the document is as the fix left it."""
    state = services.state
    try:
        uri = uri_argument(raw, COMMAND_NEXT_CANDIDATE, '{"uri": str}', required=True) or ""
    except ValueError as exc:
        return fail(services.client, str(exc))
    if state.is_running(uri):
        return fail(services.client, BUSY)
    doc = services.documents.get(uri)
    alternatives = state.offer_for(uri, doc.text if doc is not None else None)
    if alternatives is None:
        return fail(services.client, NO_NEXT)
    step = NextCandidate(services.context(), state, alternatives)
    with state.running(uri, step):
        return report(services.client, await step.run())


def next_candidate_actions(services: EditServices, uri: str, text: str,
                           params: types.CodeActionParams) -> list[types.CodeAction]:
    """"AI fix: next candidate" while a checked fix's other candidates are on offer."""
    alternatives = services.state.on_offer(uri)
    if alternatives is None or text != alternatives.expected or services.state.is_running(uri):
        return []
    following = alternatives.following()
    action = None if following is None else next_candidate_action(uri, following + 1, len(alternatives.offers),
                                                                    params)
    return [action] if action else []


async def apply_pending(services: EditServices, raw: Any) -> dict:
    """``copyAsDecode.server.applyPending``: apply the edit held for review, if the document
    is still exactly what it was computed on."""
    client = services.client
    try:
        uri = uri_argument(raw, COMMAND_APPLY_PENDING)
    except ValueError as exc:
        return fail(client, str(exc))
    pending = services.state.take_pending(uri)
    if pending is None:
        return fail(client, NOTHING_PENDING + (f" for {uri}" if uri else ""))
    doc = services.documents.get(pending.uri)
    if doc is None or doc.text != pending.before:
        return fail(client, PENDING_DROPPED)
    replacement = minimal_replacement(doc.text, pending.after)
    if replacement is None:
        return report(client, Outcome("unchanged", NOTHING_TO_APPLY))
    edit = workspace_edit(pending.uri, doc.version, text_edit(doc.text, replacement, services.encoding),
                          client.features.document_changes)
    answer = await apply_edit(client, edit, "AI edit")
    if not answer.applied:
        return report(client, Outcome("rejected", answer.problem))
    return report(client, Outcome("done", PENDING_APPLIED.format(reason=pending.reason), edits_applied=1))


def cancel(services: EditServices, raw: Any) -> dict:
    """``copyAsDecode.server.cancel``: stop the running and queued edits (of one document)."""
    try:
        uri = uri_argument(raw, COMMAND_CANCEL)
    except ValueError as exc:
        return fail(services.client, str(exc))
    count = services.state.cancel(uri)
    queued = services.queue.cancel_all(uri)
    return {"cancelled": max(count, queued)}


async def settings(services: EditServices, raw: Any) -> dict:
    """``copyAsDecode.server.settings``: the effective settings of a document (pulled first),
    their warnings, the loaded models and the last warm-ups; with ``doctor``, its report."""
    try:
        uri = uri_argument(raw, COMMAND_SETTINGS)
    except ValueError as exc:
        return fail(services.client, str(exc))
    source = services.settings
    effective, warnings = await source.pulled(uri) if uri else source.shared(None)
    answer = {"settings": effective.lsp_dict(), "warnings": warnings, "loadedModels": services.models.names(),
              "warmUps": services.warmups.done[-5:]}
    if flag_argument(raw, "doctor"):
        answer["doctor"] = await doctor(services, effective)
    return answer


async def doctor(services: EditServices, settings: Settings) -> dict[str, Any]:
    """``copy-as-decode doctor``'s report for ``settings`` (engine.doctor_report): the model as
    an edit loads it (``load_s``: how long it was waited for), the probe in a worker thread once
    no edit or warm-up runs on it; a model that cannot load gives the command's failure
    (``ok`` false, the error and the fix)."""
    from engine.doctor_report import load_failure, report as doctor_report

    began = time.perf_counter()
    try:
        engine = await services.models.engine_for(ModelKey.of(settings))
    except Exception as exc:  # noqa: BLE001 - answered as doctor answers it (and shown by engine_for)
        return load_failure(exc)
    services.warmups.stop()
    return await asyncio.to_thread(doctor_report, engine, settings, time.perf_counter() - began)
