"""What a configuration will do and why, as ``copy-as-decode doctor`` prints it and the language
server's settings command answers it for a document: the model and where it was found, backend,
device, threads, context, flash attention, selector (so the mode ``auto`` runs), the verify rule
and whether speculative drafts here, the prompt cache, and an estimate from a short probe; each
fact names the setting that changes it. First comes one plain sentence of what an edit will get
(engine.runtime.expectations: the mode, whether it drafts, and the whole-edit ratio measured for
this backend, verify rule and build). Built from a loaded engine; it decodes nothing."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from engine.api import Engine
from engine.core.choices import Mode
from engine.runtime.expectations import UNBOUNDED, Expectation, Situation, exact_rows, expect
from engine.runtime.probe import Probe
from engine.settings import SPECS, Settings

# What a load error's setting is, when its message does not say how to fix it.
LOAD_FIX = ("set `model` (--model) to 'default', a .gguf file, a model folder or a hub id in the local cache, "
            "and `backend` (--backend) to one that is installed")
# The most drafted tokens a verify could carry, for asking a backend how many it allows: enough
# to tell one row, flash attention's 63 and no bound apart.
DRAFT_ASK = UNBOUNDED


@dataclass(frozen=True)
class Line:
    """One fact: its value, why it is so, and the setting (snake_case name) that changes it."""

    value: str
    why: str
    setting: str


def diagnose(engine: Engine, settings: Settings) -> tuple[dict[str, Line], dict[str, Any] | None, Expectation]:
    """The facts of a loaded engine under ``settings``, the probe's numbers (None on a server) and
    what an edit will get."""
    mode: Mode = engine.resolve_mode(settings.edit.mode)
    runtime = engine.model_for(mode).runtime
    facts = runtime.facts()
    expectation = expectation_of(engine, settings, mode)
    chosen = " (llama.cpp for a .gguf when installed, else transformers)" if settings.model.backend == "auto" else ""
    lines = {
        "expect": Line(expectation.sentence, _source(expectation), "mode"),
        "model": Line(settings.model.name, f"found at {engine.loaded.runtime.facts()['weights']}", "model"),
        "backend": Line(engine.loaded.backend, f"{settings.model.backend} asked{chosen}", "backend"),
        "device": Line(engine.loaded.device, f"{settings.model.device} asked", "device"),
        "threads": Line(facts["threads"].split(" ", 1)[0], facts["threads"].partition(" ")[2].strip("()"),
                        "threads"),
        "context": Line(f"{runtime.context_limit() or 'unknown'} tokens",
                        "prompt plus generated text (the setting is llama.cpp's; elsewhere the model's own limit)",
                        "context_size"),
    }
    if "flash attention" in facts:
        why = ("auto: off on the CPU, where its kernel takes fewer than 64 rows one at a time"
               if settings.backend.flash_attention == "auto" else f"{settings.backend.flash_attention} asked")
        lines["flash attention"] = Line(facts["flash attention"], why, "flash_attention")
    found = engine.selector
    lines["selector"] = Line(found or "none", (f"found, so mode {settings.edit.mode} runs {mode}, on {facts['weights']}"
                                               if found else
                                               f"none found or asked for, so mode {settings.edit.mode} runs {mode}"),
                             "selector")
    lines["verify"] = _verify(engine, settings)
    lines["prompt cache"] = Line(f"{settings.backend.prefix_cache_tokens} tokens" if runtime.keeps_prompts else "off",
                                 "the next edit reuses the KV of the last prompts' shared prefix"
                                 if runtime.keeps_prompts else "every edit prefills its whole prompt",
                                 "prefix_cache_tokens")
    measured = runtime.probe()
    if measured is None:  # a server: its forwards run out of sight
        return lines, None, expectation
    lines["estimate"] = _estimate(measured)
    estimate = {"step_ms": round(measured.step_s * 1000, 1), "s": {str(n): round(r, 2) for n, r in measured.ratios.items()},
                "probe_s": round(measured.seconds, 2)}
    return lines, estimate, expectation


def expectation_of(engine: Engine, settings: Settings, mode: Mode) -> Expectation:
    """What an edit in ``mode`` will get here: the verify rule the setting means, and how many
    rows an exact verify holds on this build (asked of the text modes' runtime; None on a server)."""
    runtime = engine.loaded.runtime
    asked = runtime.verify_room(settings.edit.verify, DRAFT_ASK)
    exact = runtime.verify_room("exact", DRAFT_ASK)
    return expect(Situation(backend=engine.loaded.backend, mode=mode,
                            rule=asked[0] if asked is not None else "server",
                            exact_rows=exact_rows(exact[1]) if exact is not None else None,
                            selector=engine.selector is not None, device=engine.loaded.device))


def _source(expectation: Expectation) -> str:
    figure = expectation.figure
    if figure is None:
        return "no run in this repository measured this combination (docs/benchmarks.md)"
    return (f"measured with the embedded 135M model on a 2-core CPU, whole edit against ar: {figure.measured} "
            f"({figure.source}); your own model's ratio may differ")


def _verify(engine: Engine, settings: Settings) -> Line:
    """What the verify rule means on the text modes' backend, and whether speculative drafts there."""
    asked = engine.loaded.runtime.verify_room(settings.edit.verify, DRAFT_ASK)
    if asked is None:
        return Line(settings.edit.verify, "the server checks the drafts", "verify")
    rule, room = asked
    means = f"{settings.edit.verify} means {rule} here" if settings.edit.verify == "auto" else rule
    if room == 0:
        drafts = ("speculative drafts nothing: this build's batched forwards round differently from one-token "
                  "steps, so an exact verify holds one row and decodes like ar (verify argmax drafts, but its output may "
                  "differ from ar's)")
    else:
        drafts = ("speculative drafts: a verify of any size gives exactly what its steps would" if room >= DRAFT_ASK
                  else f"speculative drafts up to {room} tokens a verify (the most rows that round as steps do)")
    return Line(means, drafts, "verify")


def _estimate(measured: Probe) -> Line:
    ratios = ", ".join(f"s({n}) = {r:.1f}" for n, r in measured.ratios.items())
    widest = max(measured.ratios)
    return Line(f"up to {measured.speedup(widest):.1f}x on copied text",
                f"estimate from a {measured.seconds:.1f} s probe: a step {measured.step_s * 1000:.0f} ms, an N-token "
                f"forward costs s(N) steps ({ratios}), so {widest} tokens in one forward run "
                f"{measured.speedup(widest):.1f}x as fast as {widest} steps", "threads")


def screen(lines: dict[str, Line], load_s: float) -> str:
    """The facts as one screen: name, value and why, then the setting (file key and flag)."""
    out = []
    for name, line in lines.items():
        spec = SPECS[line.setting]
        out.append(f"{name:<16}{line.value}\n{'':<16}{line.why}  [{spec.name}, {spec.flag}]")
    out.append(f"{'loaded in':<16}{load_s:.1f} s")
    return "\n".join(out)


def report(engine: Engine, settings: Settings, load_s: float) -> dict[str, Any]:
    """The JSON ``doctor --json`` prints for a configuration that runs: the facts, the probe's
    numbers, what an edit will get (``expectation``: the sentence and the measured figure behind
    it, None where none was measured), the model's load time, and the screen and its summary."""
    with engine.held():  # the probe's forwards wait for a running edit and hold off the next
        lines, estimate, expectation = diagnose(engine, settings)
    return {"ok": True, "load_s": round(load_s, 2), "lines": {k: asdict(v) for k, v in lines.items()},
            "estimate": estimate, "expectation": asdict(expectation), "summary": summary(lines, engine.resolve_mode(settings.edit.mode)),
            "screen": screen(lines, load_s)}


def load_failure(exc: Exception) -> dict[str, Any]:
    """The JSON for a configuration that cannot run: the load error and the fix (empty where the
    message names one itself)."""
    message = str(exc)
    fix = "" if any(word in message for word in ("pip install", "hf download", "use '", "; run")) else LOAD_FIX
    return {"ok": False, "error": message, "fix": fix}


def summary(lines: dict[str, Line], mode: str) -> str:
    """One line for a status bar's tooltip: the mode an edit runs, model, backend, device,
    threads, verify rule and the estimate."""
    parts = [f"{mode} mode", lines["model"].value, f"{lines['backend'].value} on {lines['device'].value}",
             f"{lines['threads'].value} thread(s)", f"verify {lines['verify'].value}"]
    if "estimate" in lines:
        parts.append(f"{lines['estimate'].value} (estimate)")
    return "; ".join(parts)
