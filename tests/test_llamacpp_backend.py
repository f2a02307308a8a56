"""The llama.cpp backend on the embedded model's own Q4_1 GGUF (quantized as it is): a splice
gives the logits one-by-one decoding gives, rollback is exact, programs stay in the grammar,
speculative == ar == pld (llama-cpp-python's own prompt lookup), forced oracle programs resolve
to the gold, the span selector runs merged into a GGUF (its weights within Q8_0 rounding of base +
LoRA), the same edit twice reuses the first's prompt cache with the same output, the runtime frees
what it holds on close, and llama.cpp's failures are clear errors."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from prefix_marks import BUGGY, marked_prompts_reuse_up_to_the_mark
from support import long_function

from engine.api import EditRequest, Engine
from engine.core.errors import ModelLoadError
from engine.core.lines import split_lines
from engine.core.tokens import encode
from engine.evaluation.corpora import load_corpus
from engine.language.oracle import line_oracle
from engine.language.program import parse
from engine.language.resolve import resolve
from engine.runtime.backends import BackendError, BackendOptions, llamacpp_available
from engine.runtime.cost import CostModel

pytestmark = [pytest.mark.model]


@pytest.fixture(scope="module")
def llama() -> Engine:
    if not llamacpp_available():
        pytest.skip("llama-cpp-python is not installed (scripts/install-llamacpp.sh; make test installs it)")
    return Engine.load("default", backend="llamacpp", options=BackendOptions(threads=1, context_size=2048))


@pytest.fixture(scope="module")
def llama_flash(llama: Engine) -> Engine:
    """The same GGUF with flash attention on: its forwards below 64 rows are exactly one-token
    steps, so the splice's own mechanics (positions, cache) can be checked to the bit. The default
    (off on the CPU) rounds multi-row attention differently from a step where llama.cpp was built
    with llamafile's sgemm (see engine.runtime.backends.llamacpp.exact_rows). It asks
    for ``llama`` so that it is skipped with it where llama.cpp is not installed."""
    return Engine.load("default", backend="llamacpp", selector="none",
                       options=BackendOptions(threads=1, context_size=2048, flash_attention="on"))


def test_loads_the_gguf_itself(llama: Engine):
    assert llama.loaded.backend == "llamacpp" and llama.loaded.model is None
    assert "Q4_1.gguf" in llama.loaded.runtime.describe()
    assert llama.selector is not None and llama.selector_model.runtime.adapter is None
    assert "+smollm2-135m-q8_0-" in llama.selector_model.runtime.model.path.name


def test_merged_selector_weights_are_base_plus_lora():
    import gguf
    import numpy as np
    from gguf import quants

    from engine.runtime.sources import default_gguf_path
    from engine.runtime.selector.adapter import SHIPPED_ADAPTER_DIR
    from engine.runtime.selector.gguf_merge import _deltas, merged_gguf_for

    base_path = default_gguf_path()
    merged = gguf.GGUFReader(str(merged_gguf_for(SHIPPED_ADAPTER_DIR, base_path)))
    base = {t.name: t for t in gguf.GGUFReader(str(base_path)).tensors}
    deltas = _deltas(SHIPPED_ADAPTER_DIR, base_path)
    by_name = {t.name: t for t in merged.tensors}
    assert set(by_name) == set(base) and len(deltas) == 30 * 7
    for name in ("blk.0.attn_q.weight", "blk.7.attn_k.weight", "blk.29.ffn_down.weight"):
        want = quants.dequantize(np.asarray(base[name].data), base[name].tensor_type).reshape(deltas[name].shape)
        want = want + deltas[name]
        got = quants.dequantize(np.asarray(by_name[name].data), by_name[name].tensor_type).reshape(want.shape)
        # Q8_0: 32-value blocks scaled by max |w| / 127 (an fp16 scale): within ~half a step of it.
        step = np.abs(want.reshape(-1, 32)).max(axis=1, keepdims=True) / 127
        assert np.all(np.abs(got - want).reshape(-1, 32) <= step * 0.6 + 1e-6)
        assert float(np.abs(deltas[name]).max()) > 0  # the adapter does change this weight
    untouched = "blk.3.attn_norm.weight"
    assert np.array_equal(np.asarray(by_name[untouched].data), np.asarray(base[untouched].data))


def test_merged_gguf_is_keyed_on_content_not_path(tmp_path: Path):
    """A reinstall or a second checkout (the same GGUF at another path, a newer time) reuses the
    merged file instead of writing another 145 MB one; a changed base gets its own."""
    import shutil

    from engine.runtime.sources import default_gguf_path
    from engine.runtime.selector.adapter import SHIPPED_ADAPTER_DIR
    from engine.runtime.selector.gguf_merge import content_digest, merged_gguf_for

    base = default_gguf_path()
    first = merged_gguf_for(SHIPPED_ADAPTER_DIR, base)
    copy = tmp_path / base.name
    shutil.copyfile(base, copy)
    assert merged_gguf_for(SHIPPED_ADAPTER_DIR, copy) == first
    with copy.open("r+b") as f:  # one byte of the copy's last tensor changed: a different base
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 1]))
    assert content_digest(copy, tmp_path) != content_digest(base, tmp_path)


def test_merged_gguf_cache_keeps_the_most_recently_used(tmp_path: Path):
    import os

    from engine.runtime.selector.gguf_merge import prune

    for age, name in enumerate(["d", "c", "b", "a"]):  # a is the oldest
        path = tmp_path / f"{name}.gguf"
        path.write_bytes(b"x")
        os.utime(path, ns=(10**18 - age * 10**9, 10**18 - age * 10**9))
    (tmp_path / "digests.json").write_text("{}")
    removed = prune(tmp_path, 2)
    assert sorted(p.name for p in removed) == ["a.gguf", "b.gguf"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.gguf", "d.gguf", "digests.json"]


@pytest.mark.parametrize("seed", [0, 1])
def test_splice_logits_equal_one_token_at_a_time(llama_flash: Engine, seed: int):
    llama = llama_flash
    tok = llama.loaded.tokenizer
    rng = random.Random(seed)
    lines = split_lines(load_corpus("humanevalfix-python")[seed].input)
    prompt = encode(tok, "Edit this code.\n")
    fused, single = llama.loaded.session(), llama.loaded.session()
    fused.append(prompt, "prefill")
    single.append(prompt, "prefill")
    for _ in range(6):
        i = rng.randrange(len(lines))
        segment = [t for line in lines[i:i + rng.randrange(1, 4)] for t in encode(tok, line)]
        a = fused.append(segment, "splice")
        b = torch.stack([single.append([t], "step") for t in segment])[-1]
        assert float((a - b).abs().max()) <= 1e-4
    fused.close()
    single.close()


def test_rollback_is_exact(llama: Engine):
    tok = llama.loaded.tokenizer
    ids = encode(tok, BUGGY)
    session = llama.loaded.session()
    first = session.append(ids, "prefill", all_logits=True)
    session.crop(7)
    again = session.append(ids[7:], "again", all_logits=True)
    assert session.length == len(ids)
    assert torch.equal(again, first[7:])
    session.close()


def test_context_full_and_bad_file_are_clear_errors(llama: Engine, tmp_path: Path):
    session = llama.loaded.session()
    with pytest.raises(BackendError, match="context is full"):
        session.append([100] * 2049, "prefill")
    session.close()
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF not really")
    with pytest.raises(ModelLoadError, match="cannot load this GGUF"):
        Engine.load(str(bad), backend="llamacpp", selector="none")
    with pytest.raises(ModelLoadError, match="runs .gguf files only"):
        Engine.load(str(tmp_path), backend="llamacpp", selector="none")


def test_same_edit_twice_reuses_the_prompt_cache(llama: Engine):
    for mode in ("ar", "program"):
        llama.model_for(mode).runtime.prefixes.clear()
        request = EditRequest(BUGGY, "Fix the bug in add.", mode=mode, max_new_tokens=48)
        first, second = llama.edit(request), llama.edit(request)
        assert second.raw_output == first.raw_output and second.output_text == first.output_text
        # (program mode: the localizer's prompt, forwarded just before, shares a prefix with it)
        assert first.breakdown["prefix_reused"] < second.breakdown["prefix_reused"]
        # the whole prompt (and program mode's forced opening), its last logits kept with it
        assert second.breakdown["prefix_reused"] >= second.prompt_tokens
        assert second.breakdown["prefill_s"] < first.breakdown["prefill_s"]


def test_a_kept_prompt_gives_a_fresh_prefills_last_logits(llama: Engine):
    """llama.cpp computes each asked-for row's logits apart from the others, so a forward that
    asked for several rows (the localizer's) keeps its last row for the same prompt's prefill,
    which then forwards nothing and gets exactly a fresh prefill's logits."""
    for mode in ("ar", "program"):
        loaded = llama.model_for(mode)
        ids = encode(loaded.tokenizer, "Rewrite this code.\n" + BUGGY * 4)
        loaded.runtime.prefixes.clear()
        fresh = loaded.session()
        expected = fresh.append(ids, "prefill")
        fresh.crop(0)
        fresh.close()
        loaded.runtime.prefixes.clear()
        reader = loaded.session()
        read = reader.append(ids, "prefill", rows=[3, len(ids) - 20, len(ids) - 1])
        reader.close()
        again = loaded.session()
        got = again.append(ids, "prefill")
        assert again.reused == len(ids) and torch.equal(read[-1], expected) and torch.equal(got, expected)
        again.close()


def test_a_mark_lets_the_next_prompt_reuse_up_to_it(llama: Engine):
    for mode in ("ar", "program"):  # the base GGUF and the merged selector GGUF
        loaded = llama.model_for(mode)
        marked_prompts_reuse_up_to_the_mark(loaded, loaded.runtime.align)


def test_a_padded_prompt_chunk_keeps_only_its_own_rows(llama: Engine):
    """A prompt chunk the cost model pads (engine.runtime.cost.plan_padding) gives exactly the rows of an
    unpadded forward of that size (a row does not depend on the rows after it), leaves only its
    own tokens in the cache, and keeps a reused prefix bit-identical to a fresh prefill."""
    runtime, tok = llama.loaded.runtime, llama.loaded.tokenizer
    learned, align = runtime.cost, runtime.align
    runtime.align = 64  # the chunks flash attention runs: a 45-token prompt is one chunk, padded
    padding = CostModel.fixed({32: 30.0, 40: 30.0, 48: 36.0, 56: 40.0, 64: 20.0})
    padding.plan_padding(runtime.batch)
    assert padding.padded(45) == 64
    ids = encode(tok, "Edit this code.\n" + BUGGY * 2)
    prompt, step = ids[:45], encode(tok, "\n")
    try:
        runtime.cost = CostModel.fixed({})  # no padding: 64 real tokens, then back to the first 45
        plain = llama.loaded.session()
        whole = plain.append(ids[:64], "prefill", all_logits=True)
        plain.crop(45)
        plain_step = plain.append(step, "step")
        plain.crop(0)
        plain.close()
        runtime.prefixes.clear()
        runtime.cost = padding
        padded = llama.loaded.session()
        rows = padded.append(prompt, "prefill", all_logits=True)
        assert padded.length == 45 and padded.tokens == prompt
        assert torch.equal(rows, whole[:45])
        assert torch.equal(padded.append(step, "step"), plain_step)
        padded.crop(0)
        padded.close()
        # three copies: the chunk before the mark has 54 tokens, run as 64
        marked_prompts_reuse_up_to_the_mark(llama.loaded, runtime.align, copies=3)
    finally:
        runtime.cost, runtime.align = learned, align
        runtime.prefixes.clear()


@pytest.mark.parametrize("flash", [False, True])
def test_verifies_stay_where_rows_equal_steps_exactly(llama: Engine, llama_flash: Engine, flash: bool):
    """Within ``exact_rows`` a forward gives every row exactly a one-token step's logits, and a
    speculative decode never verifies more (even where every draft pays), so its greedy output
    is plain greedy decoding's to the bit: with flash attention on (63 rows) and off (the CPU's
    default: one row, so no draft at all, where llama.cpp was built with llamafile's sgemm; any
    number of rows without it)."""
    from engine.decoding.drafter import InputDrafter
    from engine.decoding.greedy import DraftedDecode

    loaded = (llama_flash if flash else llama).loaded
    runtime = loaded.runtime
    tok, exact = loaded.tokenizer, runtime.exact_rows
    assert runtime.flash_attention is flash
    assert exact == (63 if flash else 1 if runtime.llamafile_sgemm else None)
    rows_checked = exact or 96
    prompt, ids = encode(tok, "Copy this code.\n"), encode(tok, BUGGY * 3)[:rows_checked]
    fused, single = loaded.session(), loaded.session()
    assert fused.step_exact_rows == exact
    fused.append(prompt, "prefill")
    single.append(prompt, "prefill")
    rows = fused.append(ids, "verify", all_logits=True)
    assert torch.equal(rows, torch.stack([single.append([t], "step") for t in ids]))
    for session in (fused, single):
        session.close()
    learned = runtime.cost
    runtime.cost = CostModel.fixed({2: 1.0, 256: 1.0})  # every draft pays: as long as allowed
    try:
        plain = loaded.session()
        greedy = [t for chunk in DraftedDecode(plain, prompt, set(), 160).chunks() for t in chunk.tokens]
        plain.close()
        # drafts from the greedy output itself: every one is accepted, so the schedule would grow
        # them to 128 and more without the bound
        session = loaded.session()
        with runtime.meter() as log:
            decode = DraftedDecode(session, prompt, set(), 160, InputDrafter(greedy, cost=session.cost))
            drafted = [t for chunk in decode.chunks() for t in chunk.tokens]
        session.close()
        assert drafted == greedy
        assert decode.accepted == 0 if exact == 1 else decode.accepted > 100
        if exact is None:
            assert max(log.sizes(1)) > 63  # unbounded: the drafts grew past flash attention's bound
        else:
            assert max(log.sizes(1)) == exact  # the prompt (one forward: under 64 tokens) skipped
    finally:
        runtime.cost = learned


def test_exact_rows_follow_flash_attention_and_the_build():
    from engine.runtime.backends.llamacpp import exact_rows, pads_steps

    assert exact_rows(flash_attention=True, llamafile_sgemm=True) == 63
    assert exact_rows(flash_attention=True, llamafile_sgemm=False) == 63
    assert exact_rows(flash_attention=False, llamafile_sgemm=True) == 1
    assert exact_rows(flash_attention=False, llamafile_sgemm=False) is None
    assert exact_rows(flash_attention=False, llamafile_sgemm=True, padded_steps=True) is None
    assert exact_rows(flash_attention=True, llamafile_sgemm=True, padded_steps=True) == 63
    on = BackendOptions(padded_steps=True)
    assert BackendOptions().padded_steps is False
    assert not pads_steps(BackendOptions(), flash=False, llamafile_sgemm=True)  # off by default
    assert pads_steps(on, flash=False, llamafile_sgemm=True)
    # only where it changes something: sgemm in the build, flash attention off, the CPU's kernels
    assert not pads_steps(on, flash=True, llamafile_sgemm=True)
    assert not pads_steps(on, flash=False, llamafile_sgemm=False)
    assert not pads_steps(on.model_copy(update={"gpu_layers": -1}), flash=None, llamafile_sgemm=True)


@pytest.fixture(scope="module")
def llama_padded(llama: Engine) -> Engine:
    """The GGUF with padded steps (``padded_steps``): every one-token step runs as two rows. It
    asks for ``llama`` so that it is skipped with it where llama.cpp is not installed."""
    engine = Engine.load("default", backend="llamacpp", selector="none",
                         options=BackendOptions(threads=1, context_size=2048, padded_steps=True))
    if not engine.loaded.runtime.padded_steps:
        pytest.skip("this llama.cpp build has no llamafile sgemm: every row equals a step already")
    return engine


def test_padded_steps_equal_every_row_of_a_forward_of_any_size(llama: Engine, llama_padded: Engine):
    """With padded steps a step takes the kernel verifies take, so each row of a forward of 2 to
    130 rows is a padded step's logits to the bit (where one-row steps differ from every size), the
    padding row leaves nothing in the cache (the next step's logits are a fresh decode's) and the
    runtime bounds no verify."""
    loaded = llama_padded.loaded
    runtime, tok = loaded.runtime, loaded.tokenizer
    assert runtime.exact_rows is None and "padded steps" in runtime.describe()
    assert runtime.verify_room("exact", 64) == ("exact", 64)  # what doctor asks: any size
    assert llama.loaded.runtime.verify_room("exact", 64) == ("exact", 0)  # one-row steps: no draft
    prompt, ids = encode(tok, "Copy this code.\n" + BUGGY), encode(tok, BUGGY * 4)[:130]
    single = loaded.session()
    assert single.step_exact_rows is None
    single.append(prompt, "prefill")
    steps = torch.stack([single.append([t], "step") for t in ids])
    assert single.length == len(prompt) + len(ids)
    single.close()
    for k in (2, 3, 17, 64, 130):
        fused = loaded.session()
        fused.append(prompt, "prefill")
        assert torch.equal(fused.append(ids[:k], "verify", all_logits=True), steps[:k]), k
        fused.close()
    plain = llama.loaded.session()  # one-row steps: the same model, rounded by another kernel
    plain.append(prompt, "prefill")
    one_row = torch.stack([plain.append([t], "step") for t in ids[:8]])
    plain.close()
    assert not torch.equal(one_row, steps[:8])


@pytest.mark.parametrize("case", [None, 2, 5])
def test_speculative_equals_ar_with_padded_steps_and_drafts(llama_padded: Engine, case: int | None):
    """With padded steps, speculative mode under the exact rule drafts on the default CPU build
    (verifies of many rows, tokens accepted) and writes ar's output on the same runtime, to the
    token, whatever the drafts' sizes (drafts sized as if verifies cost a step)."""
    runtime = llama_padded.loaded.runtime
    text = BUGGY if case is None else load_corpus("humanevalfix-python")[case].input
    learned, runtime.cost = runtime.cost, CostModel.fixed({2: 1.0, 256: 1.0})
    try:
        outs = {mode: llama_padded.edit(EditRequest(text, "Fix the bug.", mode=mode, max_new_tokens=128,
                                                    verify="exact"))
                for mode in ("ar", "speculative")}
    finally:
        runtime.cost = learned
    assert outs["speculative"].output_text == outs["ar"].output_text
    assert outs["speculative"].breakdown.get("verify_calls", 0) >= 1
    assert outs["speculative"].tokens.copied > 0


def test_flash_attention_is_off_on_the_cpu_unless_asked_for(llama: Engine):
    from engine.runtime.backends.llamacpp import flash_attention

    assert flash_attention(BackendOptions()) is False
    assert flash_attention(BackendOptions(gpu_layers=-1)) is None  # llama.cpp's own choice on a GPU
    assert flash_attention(BackendOptions(flash_attention="on")) is True
    assert flash_attention(BackendOptions(flash_attention="off", gpu_layers=-1)) is False
    with pytest.raises(ValueError, match="Input should be 'auto', 'on' or 'off'"):
        BackendOptions(flash_attention="yes")
    runtime = llama.loaded.runtime
    assert runtime.describe().endswith("flash attention off)" if runtime.llamafile_sgemm
                                       else "flash attention off, without llamafile sgemm)")


def test_default_threads_are_chosen_at_load_and_say_why():
    """No thread count set: a count from 1 to the physical cores, measured at load unless the
    load leaves one core (llama.cpp's own default is 4 whatever the machine, llama-cpp-python's
    half the CPUs); the contexts run it, and describe() says why."""
    from engine.runtime.backends.llamacpp import LlamaCppRuntime, _model
    from engine.runtime.sources import default_gguf_path
    from engine.runtime.threads import physical_cores

    runtime = LlamaCppRuntime(_model(default_gguf_path(), BackendOptions(context_size=512)))
    try:
        assert 1 <= runtime.threads <= physical_cores()
        assert runtime.thread_choice.reason.startswith(("measured: 1 thread", "not measured: "))
        assert f"thread{'s' if runtime.threads > 1 else ''} ({runtime.thread_choice.reason})" in runtime.describe()
        session = runtime.session()
        session.append(list(range(10, 20)), "prefill")
        assert runtime.lib.llama_n_threads(session.slot.ctx) == runtime.threads
        session.close()
    finally:
        runtime.close()


def test_close_frees_contexts_and_later_sessions_are_refused():
    from engine.runtime.backends.llamacpp import LlamaCppRuntime, _model
    from engine.runtime.sources import default_gguf_path

    options = BackendOptions(threads=1, context_size=512, gpu_layers=0)
    runtime = LlamaCppRuntime(_model(default_gguf_path(), options))
    sessions = [runtime.session() for _ in range(2)]
    for session in sessions:
        session.append(list(range(10, 30)), "prefill")
    for session in sessions:
        session.close()
    assert runtime.prefixes.tokens_held() == 40
    runtime.close()
    assert runtime.prefixes.tokens_held() == 0 and not runtime._free
    with pytest.raises(BackendError, match="closed"):
        runtime.session()


@pytest.mark.parametrize("cost", ["cheap", "cheap, flash attention off", "dear", "learned"])
def test_speculative_and_pld_equal_ar(llama: Engine, llama_flash: Engine, cost: str):
    """Whatever the cost model decides, speculative under ``verify="exact"`` == ar. With verifies as cheap as steps it
    drafts (with flash attention on; without it only where llama.cpp was built without llamafile's
    sgemm, since with it no verify equals the steps);
    where every drafted token costs a full step no draft pays, and it decodes like ar."""
    if cost == "cheap":
        llama = llama_flash
    runtime = llama.loaded.runtime
    learned = runtime.cost
    if cost != "learned":
        runtime.cost = CostModel.fixed({2: 1.0, 256: 1.0} if cost.startswith("cheap") else {2: 2.0, 256: 256.0})
    try:
        for text in (BUGGY, load_corpus("humanevalfix-python")[2].input):
            outs = {mode: llama.edit(EditRequest(text, "Fix the bug.", mode=mode, max_new_tokens=96, verify="exact"))
                    for mode in ("ar", "speculative", "pld")}
            assert outs["speculative"].output_text == outs["ar"].output_text
            assert outs["pld"].output_text == outs["ar"].output_text
            verifies = outs["speculative"].breakdown.get("verify_calls", 0)
            if cost == "cheap":
                assert verifies >= 1
            elif cost == "cheap, flash attention off":
                assert verifies == 0 if runtime.exact_rows == 1 else verifies >= 1
            elif cost == "dear":
                assert verifies == 0 and outs["speculative"].tokens == outs["ar"].tokens
    finally:
        runtime.cost = learned


def _predicted_decode(loaded, case, verify: str | None):
    """A chat completion's decode of ``case``'s rewrite with its input as the prediction, as the
    endpoint runs it (engine.openai_api.completion.ChatDecode), under ``verify`` (None: no
    prediction, i.e. ar). Returns the decode and its chunks."""
    from engine.decoding.drafter import InputDrafter
    from engine.decoding.greedy import DraftedDecode
    from engine.decoding.prompt import PromptParts, render, text_messages
    from engine.decoding.tables import tables_for

    prompt = render(loaded.tokenizer, text_messages(PromptParts(case.instruction, case.input, language="python")))
    session = loaded.session()
    drafter = None if verify is None else InputDrafter(encode(loaded.tokenizer, case.input), cost=session.cost)
    decode = DraftedDecode(session, prompt, tables_for(loaded).stop_ids, 160, drafter, verify=verify or "exact")
    try:
        return decode, list(decode.chunks())
    finally:
        session.close()


def test_argmax_verify_drafts_past_the_exact_bound(llama: Engine):
    """On llama.cpp's default CPU build no multi-row forward equals one-token steps, so under
    ``verify="exact"`` a prediction is never drafted (nothing accepted, the output is ar's);
    under "argmax" drafts of many tokens are verified and the prediction's tokens are accepted
    (counts; drafts sized as if verifies cost a step, so the cost model's timings do not decide)."""
    runtime = llama.loaded.runtime
    if runtime.exact_rows is None:
        pytest.skip("this llama.cpp build verifies exactly at any size: both rules draft alike")
    learned, runtime.cost = runtime.cost, CostModel.fixed({2: 1.0, 256: 1.0})
    case = load_corpus("humanevalfix-python")[1]
    try:
        ar, _ = _predicted_decode(llama.loaded, case, None)
        exact, exact_chunks = _predicted_decode(llama.loaded, case, "exact")
        argmax, argmax_chunks = _predicted_decode(llama.loaded, case, "argmax")
    finally:
        runtime.cost = learned
    assert max(c.drafted for c in exact_chunks) == runtime.exact_rows - 1
    assert exact.accepted == 0 and exact.out == ar.out
    assert max(c.drafted for c in argmax_chunks) > 1
    assert argmax.accepted > 0 and argmax.steps < len(argmax.out)


@pytest.mark.parametrize("index", [0, 5, 17])
def test_forced_oracle_programs_resolve_to_gold(llama: Engine, index: int):
    case = load_corpus("humanevalfix-python")[index]
    program = line_oracle(case.input, case.gold)
    for draft in (True, False):
        result = llama.edit(EditRequest(case.input, case.instruction, mode="forced", program=program,
                                        max_new_tokens=1 << 16, draft=draft))
        assert result.output_text == case.gold and result.program == program


def test_program_mode_stays_in_the_grammar_and_drafting_is_lossless(llama: Engine):
    for case in load_corpus("humanevalfix-python")[:3]:
        runs = [llama.edit(EditRequest(case.input, case.instruction, mode="program", max_new_tokens=120,
                                       draft=draft)) for draft in (True, False)]
        assert runs[0].raw_output == runs[1].raw_output
        if runs[0].stop_reason == "done":
            program = parse(runs[0].raw_output)
            assert resolve(program, case.input).text == runs[0].region_output


def test_selector_as_llamacpp_lora_writes_the_fix(llama: Engine):
    text = Path(__file__).resolve().parents[1].joinpath("examples", "buggy_add.py").read_text()
    result = llama.edit(EditRequest(text, "Fix the bug in add.", mode="program", focus_line=3, max_new_tokens=96,
                                    language="python"))
    assert result.stop_reason == "done"
    assert result.program.serialize().startswith('<program><copy lines="1-2"/><gen>')
    assert "return a + b" in result.output_text and "return a - b" not in result.output_text


def test_the_fix_read_ahead_on_llamacpp_is_the_same_fix(llama: Engine):
    """engine.read_ahead on llama.cpp: the answer decoded while the buffer was idle is the one a
    cold edit of the same request writes, and the edit then runs no forward of its own."""
    text = "\n".join(long_function().splitlines()[:40]) + "\n"
    # Undrafted: a drafted program's forward sizes follow the cost model's timing-learned draft
    # lengths, and on llama.cpp a copy spliced in a larger forward can tip a near-tie, so two cold
    # drafted edits may differ; what is checked here is that the answer read ahead is the cold one.
    request = EditRequest(text, "Fix the bug.", mode="program", max_new_tokens=48, focus_line=12, draft=False)
    llama.forget_prompts()
    cold = llama.edit(request)
    llama.forget_prompts()
    ahead = llama.read_ahead(request)
    assert ahead.status == "done" and ahead.answered
    loaded = llama.model_for("program")
    with loaded.runtime.meter() as log:
        hot = llama.edit(request)
    assert log.sizes() == [] and "read_ahead_s" in hot.timings
    assert hot.output_text == cold.output_text and hot.program == cold.program
    llama.forget_prompts()
