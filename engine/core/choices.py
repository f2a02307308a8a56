"""The closed choice sets of the engine, declared once.

Each set is a ``Literal`` alias (what type checkers and pydantic read) and the tuple of its values
(what argparse, error messages and the editors' enums read). The settings schema, the edit
request, the backends, the CLI and the benchmarks' flags all take them from here, so a value can
be added or renamed in one place.
"""

from __future__ import annotations

from typing import Literal, get_args

# What ``EditRequest.mode`` may be: the user's modes, the measurement modes (``pld``: the
# backend's prompt-lookup decoding; ``forced``: decode a given program, for benchmarks) and
# ``aligner``: an apply merged by the aligner's rules, without a model (what ``auto`` runs for an
# apply). What each one is and needs is in engine.core.modes.
Mode = Literal["auto", "program", "speculative", "ar", "pld", "forced", "aligner"]
# What the ``mode`` setting offers: auto (program with a span selector, else speculative).
UserMode = Literal["auto", "program", "speculative", "ar"]
# What one apply may ask for (the CLI's ``apply --mode``, the language server's ``applyUpdate``,
# ``POST /v1/code/apply``): the setting's modes, and ``aligner``: the rules alone, where the fixed
# rule decides every choice they leave (in ``auto`` a user's own model decides it).
ApplyUserMode = Literal["auto", "program", "speculative", "ar", "aligner"]
# When an edit reaches the editor's document.
ApplyMode = Literal["stream", "final", "preview"]
# Program mode's prompt.
PromptStyle = Literal["auto", "few-shot", "selector"]
# How a verify forward accepts a draft (engine.decoding.greedy.DraftedDecode):
# - "exact": only within the rows where the batched forward equals one-token steps to the bit, so
#   the output is exactly plain greedy decoding's (on llama.cpp's default CPU build that is one
#   row: no draft is ever verified, and drafting decodes like ar);
# - "argmax": whatever the batched forward's argmax accepts, as llama.cpp's own speculative
#   decoding, vLLM and transformers' assisted generation do: a near-tie may come out the other way
#   than in a one-token step, so an output may differ from ar's;
# - "auto": the backend's choice (``Session.default_verify``).
Verify = Literal["auto", "exact", "argmax"]
# Where the localizer may put the prompt's hint (engine.decoding.localize.plan_focus).
FocusPolicy = Literal["keep", "move", "guard", "hold"]
# What runs the model (engine.runtime.backends).
Backend = Literal["auto", "transformers", "llamacpp", "vllm"]
# llama.cpp's flash attention.
FlashAttention = Literal["auto", "on", "off"]
# Weight and activation dtypes (aliases included).
Dtype = Literal["auto", "float32", "fp32", "bfloat16", "bf16", "float16", "fp16"]
# What the language server does while a buffer is idle.
IdleWork = Literal["fix", "prompt", "off"]
# The selector setting's named values (any other value is an adapter folder).
SelectorChoice = Literal["auto", "none"]

MODES: tuple[str, ...] = get_args(Mode)
USER_MODES: tuple[str, ...] = get_args(UserMode)
APPLY_USER_MODES: tuple[str, ...] = get_args(ApplyUserMode)
APPLY_MODES: tuple[str, ...] = get_args(ApplyMode)
PROMPT_STYLES: tuple[str, ...] = get_args(PromptStyle)
VERIFY_RULES: tuple[str, ...] = get_args(Verify)
FOCUS_POLICIES: tuple[str, ...] = get_args(FocusPolicy)
BACKENDS: tuple[str, ...] = get_args(Backend)
FLASH_ATTENTION: tuple[str, ...] = get_args(FlashAttention)
DTYPES: tuple[str, ...] = get_args(Dtype)
IDLE_WORK: tuple[str, ...] = get_args(IdleWork)
SELECTOR_CHOICES: tuple[str, ...] = get_args(SelectorChoice)

# hold: on the users' mix (half the cursors on the bug, half near it) as many passes as keep and more
# than guard, and guard's localized hint without a cursor (scripts/eval_hold_share.py, results/insertions/;
# docs/benchmarks.md).
DEFAULT_FOCUS_POLICY: FocusPolicy = "hold"

# The instruction of an AI fix that names none: the editor's without diagnostics, and the CLI's
# for an empty or blank --instruction.
FIX_INSTRUCTION = "Fix the bug"


def never_cancelled() -> bool:
    """The ``cancelled`` callback of work nobody can cancel."""
    return False
