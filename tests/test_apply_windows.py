"""Windows (engine.apply.windows): the model reads the file lines around each change and the rest
is copied without being read; the windows' programs, mapped back, give the aligner's merge."""

from __future__ import annotations

from dataclasses import replace

from engine.apply.align import align
from engine.apply.plan import Step, plan
from engine.apply.windows import Outside, Window, changes, plan_windows
from engine.bench.apply_cases import STYLES, make_case
from engine.core.lines import split_lines
from engine.language.program import CopyLines, CopyUpdate, Gen

FILE = "".join(f"value_{i} = {i}\n" for i in range(1, 301))
UPDATE = "# ... existing code ...\nvalue_150 = -150\n# ... existing code ...\n"


def steps_of(text: str, update: str):
    file, upd = split_lines(text), split_lines(update)
    return plan(align(file, upd), file, upd), file


def test_one_window_around_one_change() -> None:
    steps, file = steps_of(FILE, UPDATE)
    assert changes(steps, len(file)) == [(149, 150), (150, 150)]  # written after line 149; line 150 skipped
    parts = plan_windows(steps, len(file), margin=5)
    assert [type(p) for p in parts] == [Outside, Window, Outside]
    window = parts[1]
    assert isinstance(window, Window) and (window.first, window.last) == (144, 155)
    assert window.draft().ops == (CopyLines(1, 6), CopyLines(12 + 2, 12 + 2), CopyLines(8, 12))
    assert window.from_virtual(CopyLines(14, 14)) == CopyUpdate(2, 2)
    assert window.from_virtual(CopyLines(8, 12)) == CopyLines(151, 155)


def text_of(parts, file, update) -> str:
    out = []
    for part in parts:
        ops = [part.copy] if isinstance(part, Outside) else [step.op for step in part.steps]
        for op in ops:
            if isinstance(op, CopyLines):
                out += file[op.start - 1:op.end]
            elif isinstance(op, CopyUpdate):
                out += update[op.start - 1:op.end]
            else:
                assert isinstance(op, Gen)
                out.append(op.text)
    return "".join(out)


def test_windows_cover_the_merge_for_every_style() -> None:
    for style in STYLES:
        case = make_case("python", style, 250, 3) or make_case("python", style, 250, 4)
        assert case is not None, style
        steps, file = steps_of(case.file, case.update)
        merged = "".join(step.text for step in steps)
        for margin in (1, 3, 40):
            parts = plan_windows(steps, len(file), margin=margin)
            assert text_of(parts, file, split_lines(case.update)) == merged, (style, margin)
        wide = plan_windows(steps, len(file), margin=len(file))  # a margin as long as the file: one window
        assert len(wide) == 1 and isinstance(wide[0], Window) and wide[0].size == len(file)


def test_a_window_showing_part_of_the_update_numbers_it_from_that_part() -> None:
    """An update too long to show whole: the window's prompt shows the lines it copies (with
    context), and its program's update copies map back to the update's own line numbers."""
    steps = (Step(CopyLines(10, 12), "a\nb\nc\n"), Step(CopyUpdate(300, 302), "x\ny\nz\n"), Step(CopyLines(14, 20), ""))
    window = Window(10, 20, steps)
    start, end = window.update_span(n_update=600, context=5)
    assert (start, end) == (294, 307)
    shown = replace(window, update_offset=start)
    virtual = shown.to_virtual(CopyUpdate(300, 302))
    assert virtual == CopyLines(11 + 300 - 294, 11 + 302 - 294)
    assert shown.from_virtual(virtual) == CopyUpdate(300, 302)
    assert Window(10, 20, (steps[0],)).update_span(600, 5) == (0, 0)
