"""One builder makes every EditResult (engine.decoding.results): the document, the region and
the mode around what a writer gives, the same whoever wrote it."""

from engine.decoding.events import TokenCounts
from engine.decoding.request import EditRequest
from engine.decoding.results import (
    EMPTY_REGION,
    cancelled_result,
    decode_timings,
    edit_result,
    empty_result,
    undecoded_timings,
)
from engine.language.program import CopyLines, Program

TEXT = "a = 1\nb = 2\nc = 3\n"


def test_a_written_region_is_placed_in_the_document() -> None:
    request = EditRequest(TEXT, "Fix it.", lines=(2, 2), mode="ar")
    result = edit_result(request, "m", "b = 3\n", "done", undecoded_timings(0.5), tokens=TokenCounts(2, 1, 0),
                         program=Program((CopyLines(1, 1),)))
    assert result.output_text == "a = 1\nb = 3\nc = 3\n" and result.region == (2, 2)
    assert (result.region_input, result.region_output, result.mode, result.model) == ("b = 2\n", "b = 3\n", "ar", "m")
    assert result.tokens.total == 3 and result.changed


def test_nothing_written_leaves_the_document_as_it_was() -> None:
    request = EditRequest(TEXT, "Fix it.", mode="ar")
    for result in (edit_result(request, "m", None, "loop", {"total_s": 1.0}),
                   cancelled_result(request, "m", 12, 0.25)):
        assert result.output_text == TEXT and result.region_output == result.region_input == TEXT
        assert result.region is None and not result.changed
    cancelled = cancelled_result(request, "m", 12, 0.25)
    assert (cancelled.stop_reason, cancelled.prompt_tokens, cancelled.timings) == ("cancelled", 12, {"total_s": 0.25})


def test_an_empty_region_says_so_without_tokens() -> None:
    result = empty_result(EditRequest("", "Fix it.", mode="program"), "m")
    assert result.warnings == [EMPTY_REGION] and result.tokens.total == 0 and result.output_text == ""
    assert result.timings == {"total_s": 0.0, "decode_s": 0.0, "prefill_s": 0.0}


def test_decode_seconds_are_every_phase_but_the_prefill() -> None:
    breakdown = {"prefill_s": 0.5, "verify_s": 0.25, "localize_s": 0.125, "windows": 2}
    assert decode_timings(2.0, breakdown) == {"total_s": 2.0, "decode_s": 0.375, "prefill_s": 0.5}
