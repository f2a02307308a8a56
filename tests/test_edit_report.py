"""The edit command's report: every phase of the timing table adds up to the edit's total, and a
text mode shows the text it wrote, not a program (no model is loaded)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from engine.commands import report as report_command
from engine.commands.report import phases
from engine.decoding.events import EditResult, TokenCounts
from engine.language.program import CopyLines, Gen, Program


def result(mode: str, total: float, decode: float, prefill: float, localize: float = 0.0) -> EditResult:
    return EditResult(mode=mode, model="m", input_text="a\nc\n", output_text="a\nb\n", region=None,
                      region_input="a\nc\n", region_output="a\nb\n", program=Program((CopyLines(1, 1), Gen("b\n"))),
                      raw_output="", tokens=TokenCounts(generated=2, copied=1, forced=3), prompt_tokens=10,
                      stop_reason="done", timings={"total_s": total, "decode_s": decode, "prefill_s": prefill},
                      breakdown={"localize_s": localize} if localize else {})


def test_the_phases_add_up_to_the_total_and_the_localizer_is_one() -> None:
    # decode_s includes the localizer's forward (engine.decoding.run); the table shows it apart
    seconds = phases(result("program", 1.927, 1.369, 0.004, 0.657))
    assert seconds["localize"] == 0.66 and seconds["decode"] == 0.71 and seconds["prefill"] == 0.0
    assert round(seconds["localize"] + seconds["prefill"] + seconds["decode"] + seconds["rest"], 2) == seconds["edit"] == 1.93


def report(main: EditResult, compared: dict[str, EditResult]) -> str:
    console = Console(width=80, record=True, file=io.StringIO())
    report_command.report(console, Path("x.py"), main, compared)
    return console.export_text()


def test_a_text_mode_shows_its_text_and_a_program_mode_its_program() -> None:
    text = report(result("program", 2.0, 1.0, 0.5, 0.4), {"ar": result("ar", 4.0, 3.5, 0.5)})
    assert "\nprogram\n<program><copy lines=\"1-1\"/>" in text
    assert "\nar text\na\nb\n" in text and "ar program" not in text
    assert "x ar" in text and "localize" in text
    alone = report(result("speculative", 2.0, 1.5, 0.5), {})
    assert "\ntext\na\nb\n" in alone and "<program>" not in alone and "x ar" not in alone
