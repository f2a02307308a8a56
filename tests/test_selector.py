"""The span-selector trainer and adapter, on tiny random llama models (never the real model):
loss mask, data path, deterministic resume, adapter size limit, save/merge round trip and the
``selector`` setting."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from engine.runtime.backends.transformers_backend import TransformersRuntime
from engine.runtime.loaded import LoadedModel
from engine.runtime.selector import adapter as adapter_mod
from engine.runtime.selector.adapter import (
    MAX_ADAPTER_BYTES,
    AdapterTooLarge,
    load_selector,
    merged_model,
    resolve_selector,
    save_adapter,
)
from engine.runtime.selector.files import ADAPTER_CONFIG, ADAPTER_WEIGHTS, SelectorError
from engine.runtime.sources import DEFAULT_MODEL
from engine.training.selector.dataset import IGNORE, TrainExample, example_from_fed
from engine.training.selector.train import (
    CHECKPOINT,
    CheckpointMismatch,
    TrainConfig,
    example_loss,
    lora_model,
    train_adapter,
)


@dataclass
class FedSequence:
    """Same fields as ``engine.training.record.FedSequence``: what the program decoder fed, and which
    positions the model chose."""

    ids: list[int]
    chosen: list[bool]


def tiny_llama(vocab: int = 256, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         initializer_range=0.3)  # large enough embeddings that LoRA can move the logits
    return LlamaForCausalLM(config).eval()


def fed_sequences(n: int, seed: int = 1, vocab: int = 256) -> list[FedSequence]:
    """Prompt-like prefix (not chosen), then runs of chosen tokens between forced/spliced runs."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ids: list[int] = []
        chosen: list[bool] = []
        for run in range(6):
            length = int(torch.randint(2, 7, (1,), generator=g))
            ids += torch.randint(0, vocab, (length,), generator=g).tolist()
            chosen += [run % 2 == 1] * length  # prompt, chosen, forced/spliced, chosen, ...
        out.append(FedSequence(ids, chosen))
    return out


def examples(n: int = 4) -> list[TrainExample]:
    return [example_from_fed(f, kind="operator", language="python", source="t") for f in fed_sequences(n)]


RECIPE = TrainConfig(steps=6, lr=3e-3, warmup_steps=2, rank=4, alpha=8, seed=3)


def test_labels_are_the_chosen_tokens_only() -> None:
    for fed in fed_sequences(5):
        example = example_from_fed(fed)
        assert list(example.ids) == fed.ids
        for token, chosen, label in zip(fed.ids, fed.chosen, example.labels):
            assert label == (token if chosen else IGNORE)
        assert example.targets == sum(fed.chosen) > 0
    with pytest.raises(ValueError, match="chosen flags"):
        example_from_fed(FedSequence([1, 2, 3], [True]))


def test_loss_is_cross_entropy_on_chosen_positions_only() -> None:
    model = tiny_llama()
    example = examples(1)[0]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([list(example.ids)])).logits[0]
        terms = [torch.nn.functional.cross_entropy(logits[i - 1:i], torch.tensor([example.ids[i]]))
                 for i in range(1, len(example.ids)) if example.labels[i] != IGNORE]
        expected = torch.stack(terms).mean()
        got = example_loss(model, example)
    assert abs(float(got) - float(expected)) < 1e-5
    # A different token at a non-chosen position only matters as context: the same positions are scored.
    assert len(terms) == example.targets - (example.labels[0] != IGNORE)


def test_training_lowers_the_loss_and_changes_only_lora(tmp_path: Path) -> None:
    model = tiny_llama()
    base = {k: v.clone() for k, v in model.state_dict().items()}
    data = examples(2)
    with torch.no_grad():
        before = sum(float(example_loss(model, e)) for e in data)
    result = train_adapter(model, data, TrainConfig(steps=20, lr=1e-2, warmup_steps=1, rank=4, alpha=8),
                           tmp_path, checkpoint_every=0)
    with torch.no_grad():
        after = sum(float(example_loss(result.peft_model, e)) for e in data)
    assert after < before * 0.5, (before, after)
    assert result.finished and result.steps_done == 20 and len(result.losses) == 20
    assert (tmp_path / CHECKPOINT / "state.json").is_file()
    unwrapped = result.peft_model.unload()
    for key, value in unwrapped.state_dict().items():
        assert torch.equal(value, base[key]), f"{key} changed: only the LoRA layers may train"


def _lora_tensors(peft_model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in peft_model.state_dict().items() if "lora_" in k}


def test_resume_continues_exactly_like_an_uninterrupted_run(tmp_path: Path) -> None:
    data = examples(4)  # 6 steps over 4 examples: the resumed part crosses into a second shuffle
    straight = train_adapter(tiny_llama(), data, RECIPE, tmp_path / "a", checkpoint_every=0)

    first = train_adapter(tiny_llama(), data, RECIPE, tmp_path / "b", checkpoint_every=2, stop_after=3)
    assert not first.finished and first.steps_done == 3 and first.checkpoints == [2, 3]
    second = train_adapter(tiny_llama(), data, RECIPE, tmp_path / "b", resume=True, checkpoint_every=2)
    assert second.resumed_at == 3 and second.finished
    assert second.losses == straight.losses  # bit-identical, not merely close
    assert second.lrs == straight.lrs
    a, b = _lora_tensors(straight.peft_model), _lora_tensors(second.peft_model)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # The data order did visit every example (the second pass is shuffled anew).
    assert len({round(x, 6) for x in straight.losses}) > 1


def test_resume_refuses_another_recipe_or_other_data(tmp_path: Path) -> None:
    data = examples(3)
    train_adapter(tiny_llama(), data, RECIPE, tmp_path, stop_after=2)
    with pytest.raises(CheckpointMismatch, match="lr"):
        train_adapter(tiny_llama(), data, TrainConfig(**{**vars(RECIPE), "lr": 1e-3}), tmp_path, resume=True)
    with pytest.raises(CheckpointMismatch, match="other examples"):
        train_adapter(tiny_llama(), data[:2], RECIPE, tmp_path, resume=True)
    with pytest.raises(CheckpointMismatch, match="no checkpoint"):
        train_adapter(tiny_llama(), data, RECIPE, tmp_path / "empty", resume=True)


def test_adapter_round_trip_merges_into_a_copy(tmp_path: Path) -> None:
    base = tiny_llama()
    peft_model = lora_model(copy.deepcopy(base), TrainConfig(rank=4, alpha=8))
    with torch.no_grad():  # B starts at zero (a no-op adapter): give it weight so the merge shows
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    size = save_adapter(peft_model, tmp_path, DEFAULT_MODEL, dtype=torch.float32)
    assert size == (tmp_path / ADAPTER_WEIGHTS).stat().st_size
    config = json.loads((tmp_path / ADAPTER_CONFIG).read_text())
    assert config["base_model_name_or_path"] == DEFAULT_MODEL and config["r"] == 4
    before = {k: v.clone() for k, v in base.state_dict().items()}
    merged = merged_model(base, tmp_path)
    ids = torch.tensor([[5, 17, 99, 3, 42, 7]])
    with torch.no_grad():
        want, got, plain = peft_model(input_ids=ids).logits, merged(input_ids=ids).logits, base(input_ids=ids).logits
    assert float((want - got).abs().max()) < 1e-4
    assert float((want - plain).abs().max()) > 1e-3, "the adapter must change the model"
    for key, value in base.state_dict().items():
        assert torch.equal(value, before[key]), f"merging changed the base model's {key}"
    assert merged.model.embed_tokens.weight is base.model.embed_tokens.weight  # not adapted: shared
    assert merged.model.layers[0].self_attn.q_proj.weight is not base.model.layers[0].self_attn.q_proj.weight

    loaded = LoadedModel("tiny", base, None, "cpu", torch.float32, TransformersRuntime(base, "cpu"))
    selector = load_selector(loaded, str(tmp_path))
    assert selector is not None and selector.selector == str(tmp_path) and selector.model is not base
    assert load_selector(loaded, "none") is None


def test_adapter_records_the_prompt_layout_it_was_trained_on(tmp_path: Path) -> None:
    from engine.runtime.selector.adapter import HINT_AFTER, HINT_BEFORE, SELECTOR_INFO, prompt_layout

    peft_model = lora_model(tiny_llama(), TrainConfig(rank=4, alpha=8))
    save_adapter(peft_model, tmp_path / "new", "tiny", dtype=torch.float32)
    assert prompt_layout(str(tmp_path / "new")) == HINT_AFTER  # what recording (no adapter) uses
    assert prompt_layout(None) == HINT_AFTER
    legacy = tmp_path / "legacy"  # an adapter written before selector.json existed
    legacy.mkdir()
    assert prompt_layout(str(legacy)) == HINT_BEFORE
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / SELECTOR_INFO).write_text('{"prompt_layout": "sideways"}')
    with pytest.raises(SelectorError, match="sideways"):
        prompt_layout(str(bad))


def test_hint_after_layout_keeps_the_region_a_shared_prefix() -> None:
    """The hint after the region: a hintless prompt (the localizer's forward) and prompts with the
    cursor anywhere share every token up to the region's last line (reused from the prefix cache)."""
    from engine.decoding.prompt import PromptParts, render, selector_messages
    from engine.runtime.sources import load_tokenizer
    from engine.runtime.prefix_cache import common_prefix
    from engine.runtime.selector.adapter import HINT_AFTER, HINT_BEFORE

    tokenizer = load_tokenizer("default")
    region = "".join(f"    x{i} = f(x{i - 1})\n" for i in range(1, 40))
    parts = PromptParts(instruction="Fix the bug.", region=region)
    hintless = render(tokenizer, selector_messages(parts, HINT_AFTER))
    assert hintless == render(tokenizer, selector_messages(parts, HINT_BEFORE))  # same without a hint
    for layout in (HINT_AFTER, HINT_BEFORE):
        a, b = (render(tokenizer, selector_messages(PromptParts("Fix the bug.", region, focus_line=k), layout))
                for k in (3, 30))
        shared = min(common_prefix(hintless, a), common_prefix(a, b))
        if layout == HINT_AFTER:  # all but the end of the turn (and the last line's newline)
            assert shared >= len(hintless) - 6, (shared, len(hintless))
        else:  # the hint before the region: the region is prefilled again
            assert shared < len(hintless) // 4, (shared, len(hintless))
    content = selector_messages(PromptParts("Fix it.", "a\nb\n", focus_line=2), HINT_AFTER)[1]["content"]
    assert content.endswith("2| b\n\nThe problem is at or near line 2.\n")
    with pytest.raises(ValueError, match="layout"):
        selector_messages(parts, "sideways")


def test_adapter_for_another_model_is_refused(tmp_path: Path) -> None:
    peft_model = lora_model(tiny_llama(), TrainConfig(rank=4, alpha=8))
    save_adapter(peft_model, tmp_path, "tiny", dtype=torch.float32)
    from transformers import LlamaConfig, LlamaForCausalLM

    wider = LlamaForCausalLM(LlamaConfig(vocab_size=256, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2))
    with pytest.raises(SelectorError, match="does not fit|do not match"):
        merged_model(wider, tmp_path)


def test_size_limit_fails_loudly_and_writes_nothing(tmp_path: Path) -> None:
    peft_model = lora_model(tiny_llama(), TrainConfig(rank=4, alpha=8))
    fits = save_adapter(peft_model, tmp_path / "ok", "tiny", dtype=torch.float32)
    with pytest.raises(AdapterTooLarge, match="over the limit"):
        save_adapter(peft_model, tmp_path / "big", "tiny", dtype=torch.float32, max_bytes=fits - 1)
    assert not any((tmp_path / "big").iterdir())


def test_shipped_recipe_fits_the_limit_only_in_half_precision() -> None:
    """r=16 on every linear layer of SmolLM2-135M (dimensions from its config; no weights needed)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, head_dim=64, tie_word_embeddings=True)
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    peft_model = lora_model(model, TrainConfig())
    params = sum(p.numel() for n, p in peft_model.named_parameters() if "lora_" in n)
    assert params * 2 < MAX_ADAPTER_BYTES * 0.99 < params * 4  # fp16 fits with room for the header; fp32 does not


def test_selector_setting_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    monkeypatch.setattr(adapter_mod, "SHIPPED_ADAPTER_DIR", shipped)
    assert resolve_selector("auto", DEFAULT_MODEL) is None  # not trained yet: base model
    (shipped / ADAPTER_WEIGHTS).write_bytes(b"")
    assert resolve_selector("auto", DEFAULT_MODEL) == shipped
    assert resolve_selector(None, DEFAULT_MODEL) == shipped
    assert resolve_selector("auto", "Qwen/Qwen2.5-Coder-1.5B-Instruct") is None  # tied to the embedded model
    assert resolve_selector("none", DEFAULT_MODEL) is None
    with pytest.raises(SelectorError, match="no such folder"):
        resolve_selector(str(tmp_path / "missing"), DEFAULT_MODEL)
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "adapter_model.bin").write_bytes(b"")
    (pickled / ADAPTER_CONFIG).write_text("{}")
    with pytest.raises(SelectorError, match="only safetensors"):
        resolve_selector(str(pickled), DEFAULT_MODEL)
    with pytest.raises(SelectorError, match="adapter_config.json is missing"):
        resolve_selector(str(shipped), "any-model")
    (shipped / ADAPTER_CONFIG).write_text("{}")
    assert resolve_selector(str(shipped), "any-model") == shipped  # an explicit folder works with any model


def test_engine_runs_program_mode_on_the_selector_and_text_modes_on_the_base(tmp_path: Path) -> None:
    from engine.api import EditRequest, Engine
    from engine.runtime.sources import load_tokenizer

    tokenizer = load_tokenizer(DEFAULT_MODEL)
    base = tiny_llama(vocab=len(tokenizer))
    peft_model = lora_model(copy.deepcopy(base), TrainConfig(rank=4, alpha=8))
    save_adapter(peft_model, tmp_path, DEFAULT_MODEL, dtype=torch.float32)
    loaded = LoadedModel("tiny", base, tokenizer, "cpu", torch.float32, TransformersRuntime(base, "cpu"))
    engine = Engine(loaded, load_selector(loaded, str(tmp_path)))
    assert engine.selector == str(tmp_path)
    assert engine.model_for("program").model is not base and engine.model_for("forced").selector == str(tmp_path)
    assert engine.model_for("speculative") is loaded and engine.model_for("ar") is loaded
    text = "def add(a, b):\n    return a - b\n"
    with_selector = engine.edit(EditRequest(text, "Fix the bug.", mode="program", max_new_tokens=4))
    without = Engine(loaded).edit(EditRequest(text, "Fix the bug.", mode="program", max_new_tokens=4))
    assert with_selector.prompt_tokens < without.prompt_tokens  # the short selector prompt, chosen via loaded.selector


# --- The data path through the real recorder and the command, on a tiny model with the real tokenizer.

def _cases():
    from engine.training.synth import SynthCase

    def case(src: str, gold: str, kind: str, changed: int, focus: int | None, split: str = "train") -> SynthCase:
        return SynthCase(input=src, gold=gold, instruction="Fix the bug", kind=kind, language="python",
                         source=f"t.py:{kind}", license="PSF-2.0", split=split, changed_line=changed, focus_line=focus)

    add = 'def add(a, b):\n    """Sum."""\n    total = a + b\n    return total\n'
    big = "def biggest(xs):\n    best = xs[0]\n    for x in xs:\n        if x > best:\n            best = x\n    return best\n"
    return [case(add.replace("a + b", "a - b"), add, "bug/operator_misuse", 3, 3),
            case(big.replace("x > best", "x < best"), big, "bug/operator_misuse", 4, None),
            case(add.replace("return total", "return a"), add, "bug/variable_misuse", 4, None, "heldout")]


def test_recorded_sequences_mask_prompt_forced_and_spliced_tokens(tokenizer) -> None:
    from engine.api import Engine
    from engine.core.tokens import encode
    from engine.training.record import record_fed_sequence
    from engine.training.selector.dataset import record_examples, training_request

    model = tiny_llama(vocab=len(tokenizer))
    loaded = LoadedModel("tiny", model, tokenizer, "cpu", torch.float32, TransformersRuntime(model, "cpu"))
    cases = _cases()[:2]
    recorded = record_examples(loaded, cases, max_tokens=2048)  # fast path: checks the stand-in on case 0
    assert len(recorded.examples) == 2 and recorded.too_long == 0
    for case, example in zip(cases, recorded.examples):
        request = training_request(case)
        fed = record_fed_sequence(loaded, request)
        assert list(example.ids) == fed.ids and list(example.labels) == [t if c else IGNORE for t, c in zip(fed.ids, fed.chosen)]
        result = Engine(loaded).edit(training_request(case))
        assert result.output_text == case.gold
        assert example.targets == result.tokens.generated  # one label per decode step, none for forced/copied
        assert len(example.ids) == result.prompt_tokens + result.tokens.total
        assert all(label == IGNORE for label in example.labels[:result.prompt_tokens])
        copied = [t for line in case.input.splitlines(keepends=True)[:2] for t in encode(tokenizer, line)]
        start = next(i for i in range(result.prompt_tokens, len(example.ids))
                     if list(example.ids[i:i + len(copied)]) == copied)  # the splice of lines 1-2
        assert all(label == IGNORE for label in example.labels[start:start + len(copied)])
    assert record_examples(loaded, cases, max_tokens=50).too_long == 2


@pytest.mark.parametrize("option", ["--focus-share", "--exact-share"])
def test_train_selector_refuses_a_share_outside_0_1(option: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A share outside [0, 1] is one clear message and exit 2, before any model loads."""
    from engine.cli import main

    assert main(["train-selector", "--out", str(tmp_path / "out"), option, "1.5"]) == 2
    assert f"{option} must be between 0 and 1" in capsys.readouterr().err


def test_train_selector_command_end_to_end(tmp_path: Path, tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Record, train (stopped and resumed), save, evaluate and write the card, on a tiny model folder."""
    import engine.training.synth
    from engine.cli import main
    from engine.training.synth import SynthDataset

    model_dir = tmp_path / "tiny"
    tiny_llama(vocab=len(tokenizer)).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    cases = _cases()
    dataset = SynthDataset(train=cases[:2], heldout=cases[2:], stats={"decontamination": {"dropped": 7, "functions_checked": 90}})
    monkeypatch.setattr(engine.training.synth, "build_dataset", lambda n_train, n_heldout, seed=0, **kw: dataset)
    out, work = tmp_path / "out", tmp_path / "work"
    common = ["train-selector", "--model", str(model_dir), "--out", str(out), "--work-dir", str(work), "--steps", "4",
              "--warmup-steps", "1", "--rank", "4", "--alpha", "8", "--threads", "1", "--eval-cases", "1",
              "--eval-max-new-tokens", "8", "--max-tokens", "2048"]
    assert main(common + ["--stop-after", "2"]) == 0
    assert not (out / ADAPTER_WEIGHTS).exists() and (work / CHECKPOINT / "state.json").is_file()
    assert main(common + ["--resume"]) == 0
    for name in (ADAPTER_WEIGHTS, ADAPTER_CONFIG, "CARD.md", "loss.png", "training.json"):
        assert (out / name).is_file(), name
    info = json.loads((out / "training.json").read_text())
    assert len(info["losses"]) == 4 and info["data"]["decontaminated"] == 7
    assert [r["arm"] for r in info["evaluation"]["rows"]] == [f"program (selector), focus {f}"
                                                              for f in ("none", "near", "on", "oracle")]
    assert [r["focus"] for r in info["evaluation"]["rows"]] == ["none", "near", "on", "oracle"]
    card = (out / "CARD.md").read_text()
    assert "7 of 90 source functions" in card and "bug/operator_misuse" in card
    assert "| program (selector), focus near | 1 |" in card and "wrong-line edits" in card
    assert main(common + ["--resume", "--lr", "1e-3"]) == 2  # a different recipe does not resume silently


def test_heldout_focus_settings() -> None:
    """The held-out evaluation's three hints: none, a seeded cursor within 3 lines of the bug, the bug."""
    from engine.training.selector.evaluate import case_key, eval_focus, eval_request

    for case in _cases():
        n = len(case.input.splitlines())
        assert eval_focus(case, "none") is None and eval_focus(case, "oracle") == case.changed_line
        near = eval_focus(case, "near")
        assert 1 <= near <= n and abs(near - case.changed_line) <= 3 and near == eval_focus(case, "near")
        assert eval_request(case, "near", 32).focus_line == near
    assert len({case_key(c) for c in _cases()}) == 3  # same source, different inputs: different keys
    with pytest.raises(ValueError):
        eval_focus(_cases()[0], "cursor")


def test_train_selector_recipe_on_a_tiny_qwen25(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recipe is for the user's own model. synth (two cases) -> record -> train
    -> evaluate -> load with selector = PATH, on a random-weight model of the Qwen2.5 architecture
    (the 1.5B config shrunk) with the real Qwen2.5 tokenizer from the shared folder. A few steps:
    it proves the code path, not quality."""
    import json as _json

    from transformers import AutoConfig, AutoTokenizer, Qwen2ForCausalLM

    import engine.training.synth
    from engine.api import EditRequest, Engine
    from engine.cli import main
    from engine.evaluation.corpora import shared_dir
    from engine.training.synth import SynthDataset

    folder = shared_dir() / "tokenizers" / "qwen2.5"
    if not (folder / "tokenizer.json").is_file():
        pytest.skip(f"the shared Qwen2.5 tokenizer is not at {folder}")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    config = AutoConfig.from_pretrained(folder / "configs" / "Qwen2.5-1.5B-Instruct", hidden_size=32,
                                        intermediate_size=64, num_hidden_layers=2, layer_types=["full_attention"] * 2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                                        vocab_size=len(tokenizer), tie_word_embeddings=True)
    assert config.model_type == "qwen2"
    torch.manual_seed(0)
    model_dir = tmp_path / "qwen-tiny"
    Qwen2ForCausalLM(config).eval().save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    cases = _cases()
    dataset = SynthDataset(train=cases[:2], heldout=cases[2:], stats={})
    monkeypatch.setattr(engine.training.synth, "build_dataset", lambda n_train, n_heldout, seed=0, **kw: dataset)
    out = tmp_path / "adapter"
    assert main(["train-selector", "--model", str(model_dir), "--out", str(out), "--work-dir", str(tmp_path / "work"),
                 "--steps", "2", "--warmup-steps", "1", "--rank", "4", "--alpha", "8", "--threads", "1",
                 "--eval-cases", "1", "--eval-max-new-tokens", "8", "--max-tokens", "4096"]) == 0
    info = _json.loads((out / "training.json").read_text())
    assert len(info["losses"]) == 2 and [r["focus"] for r in info["evaluation"]["rows"]] == ["none", "near", "on", "oracle"]
    engine = Engine.load(str(model_dir), selector=str(out), backend="transformers")
    assert engine.selector is not None and engine.default_mode() == "program"
    result = engine.edit(EditRequest(cases[0].input, "Fix the bug", mode="program", max_new_tokens=8, language="python"))
    assert result.stop_reason in ("done", "max_tokens") and result.region_input == cases[0].input
