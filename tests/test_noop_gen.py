"""No-op gens at the focus (engine.decoding.noop_gen): what counts as one, which deviation is taken, and
the decoder with the real model and the shipped selector (it deviates where asked for a no-op,
stays lossless under drafting, and leaves a request without a focus alone)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from engine.decoding.noop_gen import NoOpGenGuard

LINES = ["def f(a, b):\n", "    if a < b:\n", "        return a\n", "    return b\n"]
VOCAB = ["    if", " a", " <", " >", " b", ":\n", ":", "\n", "<", "    return", " <=", ""]


def _ids(*texts: str) -> list[int]:
    return [VOCAB.index(t) for t in texts]


def test_a_noop_writes_whole_next_lines_verbatim_over_the_focus() -> None:
    guard = NoOpGenGuard(LINES, VOCAB, focus_line=2)
    assert guard.is_noop(1, "    if a < b:\n")
    assert guard.is_noop(1, "    if a < b:\n        return a\n")
    assert guard.is_noop(0, "def f(a, b):\n    if a < b:\n")
    assert not guard.is_noop(0, "def f(a, b):\n")  # the focus line is not among them: harmless
    assert not guard.is_noop(1, "    if a < b:\n        return")  # not whole lines
    assert not guard.is_noop(1, "    if a <= b:\n")
    assert not guard.is_noop(0, "    if a < b:\n")  # not the lines that follow
    assert not guard.is_noop(2, "        return a\n")  # after the focus
    assert not guard.is_noop(4, "    return b\n")  # nothing follows the last line: an addition
    assert not guard.is_noop(1, "")
    assert NoOpGenGuard(LINES, VOCAB, focus_line=4).is_noop(3, "    return b\n")


def test_rest_follows_the_escaped_input_while_the_body_spells_it() -> None:
    guard = NoOpGenGuard(["x = '<gen>'\n", "y = 1\n"], VOCAB, focus_line=1)
    escaped = guard.rest(0, "")
    assert escaped is not None and "<gen>" not in escaped  # a gen body spells reserved text escaped
    assert guard.rest(0, escaped[:5]) == escaped[5:]
    assert guard.rest(0, "z") is None
    assert guard.rest(1, "") is None  # a gen after the focus line is never tracked


def _scores(best: dict[str, float]) -> torch.Tensor:
    scores = torch.full((len(VOCAB),), float("-inf"))
    for text, value in best.items():
        scores[VOCAB.index(text)] = value
    return scores


def test_the_deviation_is_the_least_sure_token_and_leaves_the_input() -> None:
    guard = NoOpGenGuard(LINES, VOCAB, focus_line=2)
    gen = (1, 1)
    marks = [SimpleNamespace(kv_length=10 + i) for i in range(4)]
    # "    if": sure of itself; " a": sure; " <": unsure between " <" and " <=" ; ":\n": the close is far
    guard.note(gen, marks[0], _scores({"    if": 5.0, "    return": 1.0}), VOCAB.index("    if"), "".join(LINES[1:]), True)
    guard.note(gen, marks[1], _scores({" a": 6.0, " b": 2.0}), VOCAB.index(" a"), " a < b:\n", False)
    # " <" is a prefix of what follows (stays verbatim), so the alternative is " <=" or " >"
    guard.note(gen, marks[2], _scores({" <": 3.0, " <=": 2.5, " >": 1.0}), VOCAB.index(" <"), " < b:\n", False)
    # at a line start an op ("<") is no alternative
    guard.note(gen, marks[3], _scores({"<": 4.0, "": 3.9, "    return": 0.5}), VOCAB.index("<"), "        return a\n", True)
    choice = guard.best(gen)
    assert choice is not None and choice.mark is marks[2] and VOCAB[choice.token] == " <=" and choice.gap == 0.5
    assert guard.best(gen) is None  # a gen deviates once


def test_a_deviation_far_below_the_choice_is_refused_and_the_line_kept() -> None:
    """A model that finds the line right (its best way out of the input scores far below the
    no-op) keeps it: forcing a change there is damage (engine.decoding.noop_gen.MAX_GAP)."""
    gen, mark = (1, 1), SimpleNamespace(kv_length=10)
    for max_gap, taken in ((0.5, True), (0.49, False)):
        guard = NoOpGenGuard(LINES, VOCAB, focus_line=2, max_gap=max_gap)
        guard.note(gen, mark, _scores({" <": 3.0, " <=": 2.5}), VOCAB.index(" <"), " < b:\n", False)
        assert (guard.best(gen) is not None) == taken
        assert guard.refused == ([] if taken else [0.5])


def test_notes_of_another_gen_are_not_used() -> None:
    guard = NoOpGenGuard(LINES, VOCAB, focus_line=2)
    mark = SimpleNamespace(kv_length=20)
    guard.note((1, 1), mark, _scores({" a": 1.0, " b": 0.9}), VOCAB.index(" a"), " a < b:\n", False)
    assert guard.best((2, 1)) is None


# --- the decoder, with the real model and the shipped selector ------------------------------------

CHMOD = ('def chmod(self, tarinfo, targetpath):\n'
         '    """Set file permissions of targetpath according to tarinfo.\n'
         '    """\n'
         '    if tarinfo.mode is not None:\n'
         '        return\n'
         '    try:\n'
         '        os.chmod(targetpath, tarinfo.mode)\n'
         '    except OSError as e:\n'
         '        raise ExtractError("could not change mode") from e\n')  # Python 3.11 tarfile, one operator flipped


def _noop_gens_over(program, region: str, focus: int) -> int:
    from engine.core.lines import split_lines
    from engine.language.program import CopyLines, Gen

    guard = NoOpGenGuard(split_lines(region), VOCAB, focus_line=focus)
    consumed, found = 0, 0
    for op in program.ops:
        if isinstance(op, CopyLines):
            consumed = max(consumed, op.end)
        elif isinstance(op, Gen):
            found += guard.is_noop(consumed, op.text)
    return found


@pytest.mark.model
@pytest.mark.parametrize("instruction", ["Fix bugs in chmod.", "Write line 4 again exactly as it is."])
def test_program_mode_never_writes_the_focus_line_back_and_stays_lossless(default_engine, instruction: str) -> None:
    """The second instruction asks for the no-op outright: the decoder must still change line 4,
    deviating once, and the drafted decode must equal the undrafted one. The localizer is off: it
    may move the hint off line 4, and then nothing is guarded (engine.decoding.localize.plan_focus, tested
    in tests/test_localize.py); here the mechanism itself is under test."""
    from engine.api import EditRequest

    runs = [default_engine.edit(EditRequest(CHMOD, instruction, mode="program", focus_line=4, max_new_tokens=80,
                                            draft=draft, localize=False)) for draft in (False, True)]
    for run in runs:
        assert run.stop_reason == "done"
        assert _noop_gens_over(run.program, CHMOD, 4) == 0
    assert runs[0].raw_output == runs[1].raw_output
    assert runs[0].breakdown.get("noop_gen_deviations") == runs[1].breakdown.get("noop_gen_deviations")
    if instruction.startswith("Write"):
        assert runs[0].breakdown.get("noop_gen_deviations") == 1
        assert runs[0].output_text.splitlines()[3] != CHMOD.splitlines()[3]


@pytest.mark.model
def test_without_a_focus_a_noop_gen_is_left_alone(default_engine) -> None:
    from engine.api import EditRequest

    run = default_engine.edit(EditRequest(CHMOD, "Write line 4 again exactly as it is.", mode="program",
                                          max_new_tokens=80))
    assert "noop_gen_deviations" not in run.breakdown
