"""`copy-as-decode edit`: exit codes and messages for bad input, and one real edit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import ADD_DOCUMENTED as BUGGY

from engine.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """The CLI in-process, on the transformers backend like the session's ``default_engine``."""
    backend = [] if "--backend" in argv else ["--backend", "transformers"]
    try:
        code = main(["edit", *argv, *backend])
    except SystemExit as exc:  # argparse's own refusals (a flag's type or range)
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_missing_file(capsys, tmp_path: Path) -> None:
    code, _, err = run(capsys, str(tmp_path / "nope.py"), "-i", "Fix it")
    assert code == 2 and "no such file" in err


def test_undecodable_file(capsys, tmp_path: Path) -> None:
    path = tmp_path / "latin1.py"
    path.write_bytes("x = 'caf\xe9'\n".encode("latin-1"))
    code, _, err = run(capsys, str(path), "-i", "Fix it")
    assert code == 2 and "not UTF-8" in " ".join(err.split())  # rich wraps at the terminal's width


def test_file_over_the_size_limit(capsys, tmp_path: Path) -> None:
    path = tmp_path / "huge.py"
    path.write_text("x = 1\n" * 6000)
    code, _, err = run(capsys, str(path), "-i", "Fix it")
    assert code == 2 and "too large" in err


@pytest.mark.parametrize("spec", ["5-2", "1-99", "a-b"])
def test_bad_line_range(capsys, tmp_path: Path, spec: str) -> None:
    path = tmp_path / "f.py"
    path.write_text(BUGGY)
    code, _, err = run(capsys, str(path), "-i", "Fix it", "--lines", spec)
    assert code == 2 and "line" in err.lower()


def test_model_that_fails_to_load(capsys, tmp_path: Path) -> None:
    path = tmp_path / "f.py"
    path.write_text(BUGGY)
    code, _, err = run(capsys, str(path), "-i", "Fix it", "--model", str(tmp_path / "missing.gguf"))
    assert code == 2 and "missing.gguf" in err and "not found" in err


def test_real_edit_writes_output_and_json(capsys, tmp_path: Path, default_engine) -> None:
    from engine.api import EditRequest

    path = tmp_path / "add.py"
    path.write_text(BUGGY)
    out = tmp_path / "fixed.py"
    code, stdout, _ = run(capsys, str(path), "-i", "Fix the bug in add.", "--mode", "ar", "--max-new-tokens", "48",
                          "--output", str(out), "--json")
    assert code == 0
    summary = json.loads(stdout)
    expected = default_engine.edit(EditRequest(BUGGY, "Fix the bug in add.", mode="ar", max_new_tokens=48,
                                               language="python"))
    assert out.read_text() == expected.output_text
    assert summary["mode"] == "ar" and summary["tokens"]["generated"] == expected.tokens.generated
    assert summary["syntax"] == {"language": "python", "parsed_before": True, "parses_after": True, "breaks": False,
                                 "error": None, "note": None}
    assert path.read_text() == BUGGY  # --output never touches the input file


def test_in_place_keeps_original_on_error(capsys, tmp_path: Path) -> None:
    path = tmp_path / "f.py"
    path.write_text(BUGGY)
    code, _, _ = run(capsys, str(path), "-i", "Fix it", "--in-place", "--model", str(tmp_path / "x.gguf"))
    assert code == 2 and path.read_text() == BUGGY


# --- guard rails: nothing unfinished or destructive is written without --force ------------------

# The embedded model's "fix" of this function (speculative, the default mode) drops the 20-line
# note after it: 26 lines in, 2 out.
NOTE = '''def pairwise_sums(values):
    for i in range(len(values)):
        for j in range(i, len(values)):
            yield values[i] - values[j]



"""
Pairwise sums

Yields the sum of every pair of items of a list.


Input:
    values: A list of numbers

Precondition:
    The list is not empty

Output:
    A generator of sums, one per pair (i <= j)

Example:
    >>> list(pairwise_sums([1, 2]))
    [2, 3, 4]
"""
'''
LONG = "".join(f"def f{i}(x)\n    return x * {i}\n\n" for i in range(8))


def test_an_edit_cut_at_the_token_limit_is_not_written(capsys, tmp_path: Path, default_engine) -> None:
    """Speculative mode: cut at the limit, its text is the rewrite so far (program mode keeps the
    rest of the input instead, which would read as unchanged here)."""
    path = tmp_path / "long.py"
    path.write_text(LONG)
    out = tmp_path / "out.py"
    code, _, err = run(capsys, str(path), "-i", "Fix the syntax errors", "--mode", "speculative", "--max-new-tokens", "12",
                       "--in-place")
    assert code == 3, err
    assert "did not finish" in err and "12 new tokens" in err and "nothing was written" in err
    assert path.read_text() == LONG
    code, stdout, err = run(capsys, str(path), "-i", "Fix the syntax errors", "--mode", "speculative", "--max-new-tokens", "12",
                            "--output", str(out), "--json")
    summary = json.loads(stdout)
    assert code == 3 and summary["stop_reason"] == "max_tokens" and summary["written"] == []
    assert "did not finish" in summary["refused"] and not out.exists()
    code, _, err = run(capsys, str(path), "-i", "Fix the syntax errors", "--mode", "speculative", "--max-new-tokens", "12",
                       "--output", str(out), "--force")
    assert code == 0 and "written anyway" in err and out.read_text() != LONG


def test_a_destructive_fix_is_refused_without_force(capsys, tmp_path: Path, default_engine) -> None:
    from engine.api import EditRequest

    path = tmp_path / "pairs.py"
    path.write_text(NOTE)
    result = default_engine.edit(EditRequest(NOTE, "Fix the bug", mode="speculative", max_new_tokens=200,
                                             language="python"))
    assert result.stop_reason == "done" and len(result.output_text.splitlines()) <= 4, \
        "the model no longer deletes the note; pick another case"
    code, _, err = run(capsys, str(path), "-i", "Fix the bug", "--mode", "speculative", "--max-new-tokens", "200",
                       "--in-place")
    assert code == 4, err
    assert "refusing a destructive edit" in err and "delete 24 of 26 lines" in " ".join(err.split())
    assert path.read_text() == NOTE
    code, stdout, _ = run(capsys, str(path), "-i", "Fix the bug", "--mode", "speculative", "--max-new-tokens", "200",
                          "--in-place", "--json", "--force")
    summary = json.loads(stdout)
    assert code == 0 and summary["damage"]["deleted"] == 24 and summary["written"] == [str(path)]
    assert path.read_text() == result.output_text


# QuixBugs' flatten (MIT), its bug on line 7. On 2026-12-01 the embedded model's program-mode fix
# (the CLI's default, shipped selector, no --focus) wrote "        else:" over the docstring's
# opening quotes on line 9: the file no longer parsed, and the CLI wrote it. The
# model's output moves with every selector and localizer change, so the test below replays that
# recorded edit through a named fake engine.
FLATTEN = '''def flatten(arr):
    for x in arr:
        if isinstance(x, list):
            for y in flatten(x):
                yield y
        else:
            yield flatten(x)

"""
Flatten

Flattens a nested list data structure into a single list.


Input:
    arr: A list

Precondition:
    The input has no list containment cycles

Output:
    A generator for the input's non-list objects

Example:
    >>> list(flatten([[1, [], [2, 3]], [[4]], 5]))
    [1, 2, 3, 4, 5]
"""
'''


def test_an_edit_that_breaks_the_syntax_is_refused_without_force(capsys, tmp_path: Path, monkeypatch) -> None:
    import engine.commands.edit as edit_command

    monkeypatch.setattr(edit_command, "Engine", SyntaxBreakingFakeEngine)
    path = tmp_path / "flatten.py"
    path.write_text(FLATTEN)
    code, _, err = run(capsys, str(path), "-i", "Fix the bug in flatten.", "--in-place")
    err = " ".join(err.split())
    assert code == 5, err
    assert "refusing an edit that breaks the syntax" in err and "would break the python syntax (line " in err
    assert "nothing was written to" in err and "(--force writes it anyway)" in err and path.read_text() == FLATTEN
    code, stdout, _ = run(capsys, str(path), "-i", "Fix the bug in flatten.", "--in-place", "--json")
    summary = json.loads(stdout)
    assert code == 5 and summary["written"] == [] and "breaks the syntax" in summary["refused"]
    assert summary["syntax"]["breaks"] is True and summary["syntax"]["parsed_before"] is True
    assert summary["syntax"]["error"]["line"] >= 9 and summary["syntax"]["language"] == "python"
    code, stdout, _ = run(capsys, str(path), "-i", "Fix the bug in flatten.", "--in-place", "--json", "--force")
    assert code == 0 and json.loads(stdout)["written"] == [str(path)]
    assert path.read_text() == FLATTEN_BROKEN
    unparsed = FLATTEN.replace("def flatten(arr):", "def flatten(arr:")  # did not parse before the edit
    path.write_text(unparsed)
    code, stdout, _ = run(capsys, str(path), "-i", "Fix the bug in flatten.", "--json")
    summary = json.loads(stdout)
    assert code == 0 and summary["refused"] is None
    assert summary["syntax"]["parsed_before"] is False and summary["syntax"]["breaks"] is False


FLATTEN_BROKEN = FLATTEN.replace('\n"""\nFlatten', '\n        else:\nFlatten', 1)


class LoopingFakeEngine:
    """A named fake engine: its edit stops with stop_reason "loop" (the real decoders stop that
    way only on a model that loops, which the CLI test cannot count on). It records the request
    and the load arguments so the CLI's plumbing of --focus and --selector is visible."""

    name = "looping-fake"
    loads: list[dict] = []
    requests: list = []

    @classmethod
    def load(cls, model, **kwargs):
        cls.loads.append({"model": model, **kwargs})
        return cls()

    def resolve_mode(self, mode, one_shot_lines=None):
        return "program" if mode == "auto" else mode  # as the real engine with a selector

    def model_for(self, mode):
        from types import SimpleNamespace

        return SimpleNamespace(runtime=SimpleNamespace(describe=lambda: "a named fake"))

    def stream(self, request, cancelled=None):
        from engine.decoding.events import EditFinished, EditResult, EditStarted, TokenCounts
        from engine.language.program import Gen, Program

        self.requests.append(request)
        yield EditStarted(mode=request.mode, model=self.name, input_lines=3, prompt_tokens=10)
        looped = request.text + "def add(a, b):\n" * 5
        yield EditFinished(EditResult(
            mode=request.mode, model=self.name, input_text=request.text, output_text=looped, region=None,
            region_input=request.text, region_output=looped, program=Program((Gen(looped),)), raw_output=looped,
            tokens=TokenCounts(generated=40), prompt_tokens=10, stop_reason="loop",
            timings={"total_s": 0.5, "decode_s": 0.4, "prefill_s": 0.1},
            warnings=["the output is repeating itself: 'def add(a, b):' 5 times in a row (a degenerate loop "
                      "the input does not have); stopped early"]))


def test_a_loop_stop_is_not_written_and_focus_and_selector_reach_the_engine(capsys, tmp_path: Path,
                                                                            monkeypatch) -> None:
    import engine.commands.edit as edit_command

    monkeypatch.setattr(edit_command, "Engine", LoopingFakeEngine)
    path = tmp_path / "add.py"
    path.write_text(BUGGY)
    out = tmp_path / "out.py"
    code, _, err = run(capsys, str(path), "-i", "Fix the bug", "--focus", "3", "--selector", "none",
                       "--output", str(out))
    assert code == 3 and "degenerate loop" in err and "nothing was written" in err and not out.exists()
    assert LoopingFakeEngine.requests[-1].focus_line == 3
    assert LoopingFakeEngine.requests[-1].focus_policy == "hold"  # the default
    assert LoopingFakeEngine.loads[-1]["selector"] == "none"
    run(capsys, str(path), "-i", "Fix the bug", "--focus", "3", "--focus-policy", "keep")
    assert LoopingFakeEngine.requests[-1].focus_policy == "keep"
    code, _, _ = run(capsys, str(path), "-i", "Fix the bug")
    assert LoopingFakeEngine.loads[-1]["selector"] == "auto" and LoopingFakeEngine.requests[-1].focus_line is None
    assert LoopingFakeEngine.requests[-1].prompt_style == "auto"
    (tmp_path / ".copy-as-decode.toml").write_text('promptStyle = "few-shot"\n')  # the workspace setting
    run(capsys, str(path), "-i", "Fix the bug")
    assert LoopingFakeEngine.requests[-1].prompt_style == "few-shot"
    assert LoopingFakeEngine.requests[-1].verify == "auto"  # the default: the backend's rule
    (tmp_path / ".copy-as-decode.toml").write_text('verify = "argmax"\n')
    run(capsys, str(path), "-i", "Fix the bug")
    assert LoopingFakeEngine.requests[-1].verify == "argmax"
    run(capsys, str(path), "-i", "Fix the bug", "--verify", "exact")  # the flag over the setting
    assert LoopingFakeEngine.requests[-1].verify == "exact"


@pytest.mark.parametrize("argv,message", [(["--focus", "4"], "--focus 4 is outside the file's 3 lines"),
                                          (["--focus", "1", "--lines", "2-3"], "outside the edited lines 2-3")])
def test_focus_outside_the_region(capsys, tmp_path: Path, argv, message) -> None:
    path = tmp_path / "f.py"
    path.write_text(BUGGY)
    code, _, err = run(capsys, str(path), "-i", "Fix it", *argv)
    assert code == 2 and message in " ".join(err.split())


def test_a_selector_that_is_not_an_adapter(capsys, tmp_path: Path) -> None:
    path = tmp_path / "f.py"
    path.write_text(BUGGY)
    code, _, err = run(capsys, str(path), "-i", "Fix it", "--selector", str(tmp_path / "nowhere"))
    assert code == 2 and "nowhere" in err and "no such folder" in " ".join(err.split())
    assert "loading model" not in err  # refused before the model is loaded


class SyntaxBreakingFakeEngine(LoopingFakeEngine):
    """A named fake engine that replays the embedded model's recorded flatten edit (see FLATTEN):
    a finished program that breaks the file's syntax, which a live model cannot be counted on to
    write again."""

    name = "syntax-breaking-fake"

    def stream(self, request, cancelled=None):
        from engine.decoding.events import EditFinished, EditResult, EditStarted, TokenCounts
        from engine.language.program import CopyLines, Gen, Program

        self.requests.append(request)
        yield EditStarted(mode=request.mode, model=self.name, input_lines=27, prompt_tokens=10)
        output = FLATTEN_BROKEN if request.text == FLATTEN else request.text.replace('\n"""\nFlatten', '\n        else:\nFlatten', 1)
        yield EditFinished(EditResult(
            mode=request.mode, model=self.name, input_text=request.text, output_text=output, region=None,
            region_input=request.text, region_output=output,
            program=Program((CopyLines(1, 8), Gen("        else:\n"), CopyLines(10, 27))), raw_output="",
            tokens=TokenCounts(generated=4, copied=200), prompt_tokens=10, stop_reason="done",
            timings={"total_s": 0.5, "decode_s": 0.4, "prefill_s": 0.1}))


@pytest.fixture()
def no_model_load(monkeypatch):
    """Fails the test if the command loads a model (the checks below must come before any load)."""
    from engine.api import Engine

    def refuse(*args, **kwargs):
        pytest.fail("a model was loaded")

    monkeypatch.setattr(Engine, "load", refuse)


@pytest.mark.parametrize("argv,message", [
    (["--compare", "foo"], "--compare 'foo': unknown mode 'foo'"),
    (["--compare", "ar,forced"], "unknown mode 'forced'"),
    (["--max-new-tokens", "0"], "--max-new-tokens must be between 1 and 65536, got 0"),
    (["--max-new-tokens", "-3"], "--max-new-tokens must be between 1 and 65536, got -3"),
    (["--in-place", "--output", "OUT"], "--in-place and --output exclude each other"),
    (["--lines", "x-2"], "expected A-B"),
])
def test_argument_errors_exit_2_before_the_model_loads(capsys, tmp_path: Path, no_model_load, argv, message) -> None:
    path, out = tmp_path / "f.py", tmp_path / "out.py"
    path.write_text(BUGGY)
    code, _, err = run(capsys, str(path), "-i", "Fix it", *[str(out) if a == "OUT" else a for a in argv])
    assert code == 2 and message in " ".join(err.split())
    assert path.read_text() == BUGGY and not out.exists()


@pytest.mark.parametrize("extra", [[], ["--lines", "1-1"], ["--in-place"]])
def test_an_empty_file_answers_at_once_without_the_model(capsys, tmp_path: Path, no_model_load, extra) -> None:
    path = tmp_path / "empty.py"
    path.write_text("")
    code, out, err = run(capsys, str(path), "-i", "Fix the bug", "--json", *extra)
    summary = json.loads(out)
    assert code == 0, err
    assert summary["program"] == "<program></program>" and summary["tokens"]["total"] == 0
    assert summary["changed"] is False and summary["prompt_tokens"] == 0
    assert any("region is empty" in w for w in summary["warnings"])
    assert summary["no_fix"] is None  # nothing was asked of the model: exit 0, not EXIT_NO_FIX
    assert path.read_text() == ""


@pytest.mark.model
def test_the_api_answers_an_empty_region_without_a_forward(default_engine) -> None:
    from engine.api import EditRequest

    text = "x = 1\n"
    with default_engine.loaded.runtime.meter() as log:
        result = default_engine.edit(EditRequest("", "Fix the bug"))
    assert not log.records and result.output_text == "" and result.stop_reason == "done"
    assert result.tokens.total == 0 and not result.program.ops
    assert EditRequest(text, "Fix", lines=(1, 1)).is_empty() is False


def test_a_hub_id_not_in_the_cache_fails_at_once_with_the_fetch_command(capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("COPY_AS_DECODE_DOWNLOAD", raising=False)
    path = tmp_path / "f.py"
    path.write_text(BUGGY)
    code, _, err = run(capsys, str(path), "-i", "Fix it", "--model", "someone/not-a-model")
    err = " ".join(err.split())
    assert code == 2 and "not in the local Hugging Face cache" in err
    assert "`hf download someone/not-a-model`" in err and "COPY_AS_DECODE_DOWNLOAD=1" in err


@pytest.mark.parametrize("env,allowed", [({}, False), ({"COPY_AS_DECODE_DOWNLOAD": "1"}, True),
                                         ({"COPY_AS_DECODE_DOWNLOAD": "1", "HF_HUB_OFFLINE": "1"}, False)])
def test_downloads_only_when_asked(monkeypatch, env, allowed) -> None:
    from engine.runtime.sources import downloads_allowed

    for name in ("COPY_AS_DECODE_DOWNLOAD", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert downloads_allowed() is allowed


# -- no fix, advice that fits, an empty instruction (the real model) -----------------------------------

# Correct code the embedded model keeps at line 3 (it writes the line back; no change is likely
# enough to force), and a typo it fixes with any instruction.
GREET = "def greet(name):\n    \"\"\"Say hello.\"\"\"\n    print('Hello, ' + name)\n"
TYPO = "def count_items(xs):\n    count = 0\n    for x in xs:\n        count += 1\n    return coutn\n"


@pytest.mark.model
def test_no_fix_exits_8_and_says_why(capsys, tmp_path: Path, default_engine) -> None:
    from engine.verdict import EXIT_NO_FIX

    path = tmp_path / "greet.py"
    path.write_text(GREET)
    code, _, err = run(capsys, str(path), "-i", "Fix the bug", "--focus", "3", "--in-place")
    words = " ".join(err.split())
    assert code == EXIT_NO_FIX == 8, err
    assert "no fix found: the model kept line 3" in words and "try --candidates 4" in words
    assert "line 3: what is wrong and what it should do" in words and "loop" not in words  # a print line
    assert path.read_text() == GREET
    code, out, err = run(capsys, str(path), "-i", "Fix the bug", "--focus", "3", "--json")
    summary = json.loads(out)
    assert code == EXIT_NO_FIX and summary["changed"] is False and summary["refused"] is None
    assert summary["no_fix"]["line"] == 3 and summary["no_fix"]["message"].startswith("no fix found")


@pytest.mark.model
def test_no_fix_advice_after_candidates_suggests_no_flag_already_given(capsys, tmp_path: Path,
                                                                        default_engine) -> None:
    """--candidates 4 with a check that fails every candidate: exit 6 (nothing passed), and the
    edit as asked kept the code, so the no-fix reason follows, without --candidates 4 or --check."""
    from engine.verdict import EXIT_NO_VERIFIED_FIX

    path = tmp_path / "greet.py"
    path.write_text(GREET)
    code, _, err = run(capsys, str(path), "-i", "Fix the bug", "--focus", "3", "--in-place",
                       "--candidates", "4", "--check", "exit 1")
    words = " ".join(err.split())
    assert code == EXIT_NO_VERIFIED_FIX, err
    assert path.read_text() == GREET
    assert "no fix found" in words, err
    assert "a larger --candidates than the 4 given, e.g. --candidates 8" in words
    assert "try --candidates 4" not in words and "--check CMD" not in words and "loop" not in words


@pytest.mark.model
@pytest.mark.parametrize("instruction", ["", "  \t"])
def test_an_empty_instruction_is_fix_the_bug(capsys, tmp_path: Path, default_engine, instruction: str) -> None:
    path = tmp_path / "count.py"
    path.write_text(TYPO)
    code, out, err = run(capsys, str(path), "-i", instruction, "--focus", "5", "--in-place", "--json")
    assert code == 0, err
    assert 'an empty instruction: editing with "Fix the bug"' in err
    assert [line for line in err.splitlines() if "empty instruction" in line] == [
        'an empty instruction: editing with "Fix the bug"']
    assert path.read_text() == TYPO.replace("coutn", "count")


def test_a_blank_instruction_is_said_before_anything_else(capsys, tmp_path: Path, no_model_load) -> None:
    path = tmp_path / "count.py"
    path.write_text(TYPO)
    code, _, err = run(capsys, str(path), "-i", " ", "--compare", "foo")
    assert code == 2 and err.startswith('an empty instruction: editing with "Fix the bug"\n')
