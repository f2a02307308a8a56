"""Synthetic edit cases for training the span selector.

Sources: the running interpreter's standard library (PSF-2.0) and pinned npm packages under
MIT/ISC/BSD/Apache licenses (parsed with acorn); edits: one injected bug of each HumanEvalFix class
(gold = the original) and instructed edits whose gold a program computes; decontaminated against
every evaluation corpus by token 8-gram Jaccard similarity; held-out split by whole source file.
"""

from engine.training.synth.cases import SynthCase, SynthDataset, read_cases
from engine.training.synth.dataset import SynthError, build_dataset
from engine.training.synth.edits import ALL_KINDS, BUG_KINDS, EDIT_KINDS, first_changed_line

__all__ = ["ALL_KINDS", "BUG_KINDS", "EDIT_KINDS", "SynthCase", "SynthDataset", "SynthError", "build_dataset",
           "first_changed_line", "read_cases"]
