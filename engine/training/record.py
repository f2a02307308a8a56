"""Training data for the span selector, recorded through the decoder's own code path.

``record_fed_sequence`` runs one ``forced`` edit (the teacher writes the given program) and keeps
exactly what the program decoder fed the model: the prompt, every chosen token, every forced
literal and every spliced copy, with the decoder's own tokenization rules. Training on that
sequence, with the loss on the chosen positions only, teaches the model the very steps it takes
at inference; nothing re-implements the decoder, so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.choices import never_cancelled
from engine.core.modes import traits
from engine.api import EditRequest
from engine.decoding.events import EditFinished
from engine.decoding.program_decoder import FeedRecorder
from engine.decoding.run import run_edit
from engine.runtime.loaded import LoadedModel


@dataclass(frozen=True)
class FedSequence:
    """Token ids in the order the decoder fed them; ``chosen[i]``: token ``i`` was chosen by the
    model (a loss target), not the prompt, a forced literal or a spliced copy."""

    ids: list[int]
    chosen: list[bool]
    output: str  # what the program resolved to (the gold, for an oracle program)


def record_fed_sequence(loaded: LoadedModel, request: EditRequest) -> FedSequence:
    """Run ``request`` (``mode="forced"`` with its ``program``) and return what was fed."""
    if not traits(request.mode).given_program or request.program is None:
        raise ValueError("record_fed_sequence needs a forced request with the program to record")
    request.validate()
    recorder = FeedRecorder()
    output = None
    for event in run_edit(loaded, request, never_cancelled, recorder=recorder):
        if isinstance(event, EditFinished):
            output = event.result.output_text
            if event.result.stop_reason != "done":
                raise ValueError(f"recording stopped early ({event.result.stop_reason}); "
                                 f"raise max_new_tokens above {request.max_new_tokens}")
    assert output is not None
    return FedSequence(ids=list(recorder.ids), chosen=list(recorder.chosen), output=output)
