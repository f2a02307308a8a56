"""Benchmarks: smoke tests of the harness (never timed assertions), hand-checked bounds, the
prompt-lookup emulation against transformers' own, and the pass@1 runner on real corpus cases."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from engine.bench.bounds import KernelCurve, bound, paper_cost, structure_cost
from engine.bench.edits import pld_draft

REPO = Path(__file__).resolve().parent.parent

# s(N) measured at 1, 2, 4, 8, 16 (hand-made): s = 1, 2, 3, 4, 8.
HAND_KERNEL = [{"N": 1, "speedup": 1.0}, {"N": 2, "speedup": 2.0}, {"N": 4, "speedup": 3.0},
               {"N": 8, "speedup": 4.0}, {"N": 16, "speedup": 8.0}]


def test_kernel_curve_interpolates_log_linearly() -> None:
    k = KernelCurve.from_points(HAND_KERNEL)
    assert k.s(1) == 1.0 and k.s(0.5) == 1.0
    assert k.s(4) == 3.0
    assert k.s(3) == pytest.approx(2 + (math.log2(3) - 1))  # 2.5850: between (2, 2) and (4, 3) in log2 N
    assert k.s(12) == pytest.approx(4 + 4 * (math.log2(12) - 3))  # 6.3399
    assert k.s(64) == 8.0  # flat beyond the largest N
    # s(1) is 1 by definition even when the measurement says otherwise
    assert KernelCurve.from_points([{"N": 1, "speedup": 0.9}, {"N": 2, "speedup": 1.8}]).s(1) == 1.0


def test_bounds_on_a_hand_made_histogram() -> None:
    """T = 100 gold tokens: 10 generated, copy spans of 16, 64 and 10 tokens.

    paper:  10 + 16/8 + 64/8 + 10/s(10), s(10) = 4 + 4 (log2 10 - 3) = 5.2877 -> 21.8912 steps -> 4.568x
    structure-aware: 20 chosen tokens, forced literal runs of 2, 1, 3 tokens:
            20 + (2/2 + 1/1 + 3/2.5850) + 11.8912 = 35.0517 steps -> 2.853x
    """
    k = KernelCurve.from_points(HAND_KERNEL)
    spans = [16, 64, 10]
    assert paper_cost(10, spans, k) == pytest.approx(21.8912, abs=1e-4)
    assert bound(100, paper_cost(10, spans, k)) == pytest.approx(4.5681, abs=1e-4)
    assert structure_cost(20, [2, 1, 3], spans, k) == pytest.approx(35.0517, abs=1e-4)
    assert bound(100, structure_cost(20, [2, 1, 3], spans, k)) == pytest.approx(2.8529, abs=1e-4)
    assert bound(5, 0) is None


def test_pld_draft_matches_transformers_prompt_lookup() -> None:
    import torch
    from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

    gen = torch.Generator().manual_seed(0)
    stop = {7}
    for trial in range(200):
        seq = torch.randint(0, 12, (int(torch.randint(2, 60, (1,), generator=gen)),), generator=gen).tolist()
        ref = PromptLookupCandidateGenerator(eos_token_id=torch.tensor(sorted(stop)), num_output_tokens=10,
                                             max_matching_ngram_size=2, max_length=10_000)
        cand, _ = ref.get_candidates(torch.tensor([seq]))
        expected = cand[0, len(seq):].tolist()
        assert pld_draft(seq, stop) == expected, (trial, seq)


# --- the pass@1 runner on real cases ------------------------------------------------------------

def _cases(name: str, ids: list[str]):
    from engine.corpora import load_corpus

    by_id = {c.id: c for c in load_corpus(name)}
    return [by_id[i] for i in ids]


@pytest.mark.parametrize("corpus,ids", [
    ("humanevalfix-python", ["Python/0", "Python/1", "Python/2"]),
    ("humanevalfix-js", ["JavaScript/0", "JavaScript/1", "JavaScript/2"]),
    ("canitedit", ["1_cipher", "3_hello_world", "9_sorting"]),
])
def test_runner_passes_gold_and_fails_buggy(corpus: str, ids: list[str]) -> None:
    from engine.bench.runner import run_tests

    for case in _cases(corpus, ids):
        gold = run_tests(case)
        assert gold.passed, (case.id, gold.detail)
        buggy = run_tests(case, case.input)
        assert not buggy.passed and buggy.status == "fail", case.id


def test_runner_times_out_and_isolates(tmp_path: Path) -> None:
    from engine.bench.runner import run_tests
    from engine.corpora import EditCase

    loop = EditCase(id="loop", corpus="t", language="python", input="", gold="", instruction="",
                    test="while True:\n    pass\n")
    outcome = run_tests(loop, "", timeout=1.5)
    assert outcome.status == "timeout" and not outcome.passed
    # -I: the working folder is a fresh temp dir and user site / PYTHON* variables are ignored
    probe = EditCase(id="probe", corpus="t", language="python", input="", gold="", instruction="",
                     test="import os, sys\nassert sys.flags.isolated\nassert os.listdir('.') == ['candidate.py'], os.listdir('.')\n")
    assert run_tests(probe, "").passed
    js = EditCase(id="js", corpus="t", language="javascript", input="", gold="", instruction="",
                  test="console.assert(1 === 2)\n")
    assert run_tests(js, "").status == "fail"  # exit code 0, but "Assertion failed" printed


# --- smoke runs with the default model ----------------------------------------------------------

@pytest.fixture()
def cached_engine(default_engine, monkeypatch):
    """The session's engine, also behind the CLI's engine cache (no second model load)."""
    from engine.bench import harness

    monkeypatch.setitem(harness._ENGINES, ("default", None, None), default_engine)
    return default_engine


@pytest.mark.model
def test_bench_kernel_cli(cached_engine, tmp_path: Path) -> None:
    from engine.cli import main

    out = tmp_path / "kernel.json"
    assert main(["bench", "kernel", "--ns", "1,2,4", "--trials", "2", "--context", "64", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["model"] == "default" and data["device"] == "cpu" and data["context"] == 64
    assert [p["N"] for p in data["points"]] == [1, 2, 4]
    for p in data["points"]:
        assert p["ar_s"] > 0 and p["prefill_s"] > 0 and p["speedup"] == pytest.approx(p["ar_s"] / p["prefill_s"])
        assert len(p["ar_trials_s"]) == 2
    assert (tmp_path / "kernel.png").stat().st_size > 1000


@pytest.mark.model
def test_bench_edits_forced_cli(cached_engine, tmp_path: Path) -> None:
    from engine.bench.report import markdown_report
    from engine.cli import main

    kernel = tmp_path / "bench_kernel.json"
    kernel.write_text(json.dumps({"model": "hand", "device": "cpu", "context": 1024, "trials": 1, "warmup": 0,
                                  "points": [{**p, "ar_s": p["N"] * 0.01, "prefill_s": 0.01 * p["N"] / p["speedup"]}
                                             for p in HAND_KERNEL]}))
    out = tmp_path / "bench_forced_humanevalfix-python.json"
    assert main(["bench", "edits", "--corpus", "humanevalfix-python", "--family", "forced", "--arms", "ar,program",
                 "--limit", "1", "--no-warmup", "--kernel", str(kernel), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["corpus"] == "humanevalfix-python" and data["family"] == "forced" and data["cases"] == 1
    assert set(data["arms"]) == {"ar", "program"}
    for arm in data["arms"].values():
        assert {"total_s", "median_s", "speedup_vs_ar", "median_speedup_vs_ar", "tokens", "forwards"} <= set(arm)
        assert arm["ok"] == 1  # both arms produce the gold
    case = data["per_case"][0]
    assert data["arms"]["ar"]["forwards"] == case["gold_tokens"]  # one forward per gold token
    assert data["arms"]["ar"]["speedup_vs_ar"] == 1.0
    program = data["arms"]["program"]
    assert program["forwards"] < case["gold_tokens"] and program["copied"] > 0
    b = data["bounds"]
    assert b["paper"] > b["structure_aware"] > 0 and b["walk_matches_engine"] == 1
    assert b["T"] == case["gold_tokens"] == b["T_gen"] + sum(case["oracle"]["spans"])
    assert (tmp_path / "bench_forced_humanevalfix-python.png").stat().st_size > 1000
    assert "Forced family" in markdown_report(tmp_path)


@pytest.mark.model
def test_bench_edits_free(cached_engine) -> None:
    from engine.bench.edits import run_corpus

    data = run_corpus(cached_engine, "humanevalfix-python", "free", ["ar", "program"], limit=1, max_new_tokens=32,
                      progress=False, warmup=False, test_timeout=10)
    assert data["family"] == "free" and data["cases"] == 1 and data["bounds"] is None
    for name, arm in data["arms"].items():
        assert arm["total_s"] > 0 and arm["tokens"] > 0 and 0 <= arm["pass_at_1"] <= 1, name
        assert arm["forwards"] >= 1
    assert data["arms"]["ar"]["same_as_ar"] == 1
    assert data["reference"] == {"gold_pass": 1, "cases": 1}
    assert data["per_case"][0]["arms"]["ar"]["test"] in ("pass", "fail", "timeout")


def test_gpu_kernel_script_runs_tiny_on_cpu(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_kernel.py"), "--tiny", "--device", "cpu",
                           "--ns", "1,2", "--trials", "1", "--warmup", "0", "--context", "16", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    files = sorted(p.name for p in tmp_path.glob("*.json"))
    assert files == ["bench_kernel_gpu_qwen2.5-1.5b-instruct-tiny.json", "bench_kernel_gpu_qwen2.5-7b-instruct-tiny.json"]
    data = json.loads((tmp_path / files[0]).read_text())
    assert data["architecture"] == "Qwen2.5-1.5B-Instruct" and [p["N"] for p in data["points"]] == [1, 2]


@pytest.mark.model
def test_forced_text_prompt_is_the_engines(default_engine) -> None:
    """The forced text arms decode after exactly the prompt the engine's text modes use."""
    from engine.api import EditRequest
    from engine.bench.edits import _language, text_prompt_ids
    from engine.events import EditStarted

    case = _cases("humanevalfix-js", ["JavaScript/3"])[0]
    stream = default_engine.stream(EditRequest(case.input, case.instruction, mode="ar", max_new_tokens=1,
                                               **_language(case)))
    started = next(stream)
    stream.close()
    assert isinstance(started, EditStarted)
    assert started.prompt_tokens == len(text_prompt_ids(default_engine.loaded.tokenizer, case))
