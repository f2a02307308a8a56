"""Candidate fixes checked by the user's own command (engine.candidates.search) and the check
runner (engine.candidates.check). It sits above engine.verdict (a guard's refusal removes a
candidate) and below the front doors (the CLI, the HTTP endpoint, the language server)."""

from engine.candidates.check import CheckOutcome, CheckSpec, run_check
from engine.candidates.search import Candidate, Search, search_fixes

__all__ = ["Candidate", "CheckOutcome", "CheckSpec", "Search", "run_check", "search_fixes"]
