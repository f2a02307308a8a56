"""Prompt lookup as a drafter: the forced family's ``pld`` arm drafts as the engine's ``pld`` mode
does, with transformers' own candidate generator (``PromptLookupCandidateGenerator``, what
``generate(prompt_lookup_num_tokens=10)`` builds: the leftmost earlier occurrence of the last
2-gram, else 1-gram, in prompt + output; up to 10 tokens, cut before an end token), proposing to
:class:`engine.decoding.greedy.DraftedDecode`."""

from __future__ import annotations

from typing import Sequence

PLD_DRAFT_TOKENS = 10  # the engine's pld mode: generate(prompt_lookup_num_tokens=10)
UNBOUNDED = 1 << 62  # no total length stops the lookup (the decode's own limit does)


class PromptLookupDrafter:
    """Drafts from ``prompt_ids`` + the output so far. As in ``generate``, a draft is not cut to the
    room the decode has left (``limit``), and its size follows no feedback."""

    def __init__(self, prompt_ids: Sequence[int], stop_ids: frozenset[int] | set[int]):
        import torch
        from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

        self.torch = torch
        self.prompt = list(prompt_ids)
        eos = torch.tensor(sorted(stop_ids)) if stop_ids else None
        self.lookup = PromptLookupCandidateGenerator(eos_token_id=eos, num_output_tokens=PLD_DRAFT_TOKENS,
                                                     max_length=UNBOUNDED)

    def propose(self, context: Sequence[int], limit: int) -> list[int]:
        ids = self.torch.tensor([self.prompt + list(context)])
        candidates, _ = self.lookup.get_candidates(ids)
        return candidates[0, ids.shape[1]:].tolist()

    def feedback(self, proposed: int, accepted: int) -> None:
        pass

    def step_without_draft(self) -> None:
        pass
