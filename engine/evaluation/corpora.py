"""Edit corpora: HumanEvalFix (every HumanEvalPack language) and CanItEdit, as one record type.

The data lives outside the repository, in ``<repo root>/../shared/data`` (override the shared
folder with the environment variable ``COPY_AS_DECODE_SHARED``). It is read in place and never
copied into the project: CanItEdit's license allows evaluation only, never training.

Corpora
-------
``humanevalfix-<lang>`` (lang in python, js, cpp, go, java, rust; 164 cases each)
    input = ``declaration + buggy_solution``, gold = ``declaration + canonical_solution``,
    instruction ``"Fix bugs in {entry_point}."`` (the HumanEvalPack harness's wording).
``canitedit`` (105 cases)
    input = ``before``, gold = ``after``; the instruction is ``instruction_descriptive`` and
    ``instructions`` also holds ``"lazy"`` (``instruction_lazy``).

Tests: :meth:`EditCase.test_program` turns a candidate *whole file* (input-shaped text, i.e. with
the declaration) into the text a runner executes; ``test_fields`` keeps the raw fields a runner
may need beyond that (``test``, ``entry_point``, ``import``, ``test_setup``, ...).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from engine.core import environment

SHARED_ENV = environment.SHARED
HUMANEVALFIX_LANGUAGES = ("python", "js", "cpp", "go", "java", "rust")
CANITEDIT = "canitedit"
ALL = "all"

# Language of each HumanEvalPack file as a runner names it.
_LANGUAGE_NAMES = {"python": "python", "js": "javascript", "cpp": "cpp", "go": "go", "java": "java",
                   "rust": "rust"}


class CorpusError(RuntimeError):
    """A corpus that cannot be loaded; the message says which file is missing and how to fix it."""


@dataclass(frozen=True)
class EditCase:
    """One instructed edit: turn ``input`` into ``gold`` following ``instruction``.

    ``instructions`` maps every instruction variant by name (the default one included);
    ``test`` is the test code and ``test_fields`` the raw fields a runner needs; build the runnable
    text for a candidate whole file with :meth:`test_program`.
    """

    id: str
    corpus: str
    language: str
    input: str
    gold: str
    instruction: str
    instructions: Mapping[str, str] = field(default_factory=dict, hash=False)
    test: str = ""
    test_fields: Mapping[str, str] = field(default_factory=dict, hash=False)

    def test_program(self, candidate: str | None = None) -> str:
        """Runnable test text for ``candidate`` (a whole edited file; default: the gold).

        python, javascript, cpp, java: ``candidate + "\\n" + test`` (Python: run it; JS: run it
        with Node and treat any "Assertion failed" output as a failure; C++: compile and run;
        Java: save as ``Main.java``). go: ``test_setup + import + candidate + "\\n" + test``
        as a ``_test.go`` file (unused imports may need pruning, as the HumanEvalPack harness
        does). rust: ``"fn main(){}\\n" + candidate + "\\n" + test`` under ``cargo test``
        (crates rand, regex, md5). canitedit: ``candidate + "\\n" + tests``, run with Python.
        """
        text = self.gold if candidate is None else candidate
        if self.language == "go":
            prefix = self.test_fields.get("test_setup", "") + self.test_fields.get("import", "")
            return prefix + text + "\n" + self.test
        if self.language == "rust":
            return "fn main(){}\n" + text + "\n" + self.test
        return text + "\n" + self.test


def body_only(case: EditCase) -> EditCase:
    """The case without its HumanEvalFix declaration (``buggy_solution`` -> ``canonical_solution``).

    This is the pair the seed paper counts its Table 2 on; the product edits whole files, so the
    loaders keep the declaration and this view exists for ``analyze --convention paper`` only.
    Cases without a declaration (CanItEdit) come back unchanged. The view is for counting:
    :meth:`EditCase.test_program` still expects a whole file, so prepend the declaration first.
    """
    declaration = case.test_fields.get("declaration", "")
    if not declaration:
        return case
    if not (case.input.startswith(declaration) and case.gold.startswith(declaration)):
        raise CorpusError(f"{case.id}: input/gold do not start with its declaration; "
                          "was the case built by load_corpus?")
    return replace(case, input=case.input[len(declaration):], gold=case.gold[len(declaration):])


def repo_root() -> Path:
    """The checkout this engine runs from (engine/evaluation/corpora.py is two folders below it)."""
    return Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    """The shared folder: ``$COPY_AS_DECODE_SHARED`` if set, else ``<repo root>/../shared``."""
    override = os.environ.get(SHARED_ENV)
    folder = Path(override).expanduser() if override else repo_root().parent / "shared"
    if not folder.is_dir():
        how = f"${SHARED_ENV}={override}" if override else f"{repo_root()}/../shared"
        raise CorpusError(
            f"shared folder not found: {folder} (from {how}); point the environment variable "
            f"{SHARED_ENV} at the folder that holds data/humanevalpack and data/canitedit"
        )
    return folder


def corpus_names() -> list[str]:
    """Every corpus name ``load_corpus`` accepts (``"all"`` excluded)."""
    return [f"humanevalfix-{lang}" for lang in HUMANEVALFIX_LANGUAGES] + [CANITEDIT]


def _data_file(*parts: str) -> Path:
    path = shared_dir().joinpath("data", *parts)
    if not path.is_file():
        raise CorpusError(f"corpus file not found: {path} (is {SHARED_ENV} pointing at the right folder?)")
    return path


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise CorpusError(f"{path}:{number}: not valid JSON: {exc}") from exc
    return rows


def _load_humanevalfix(lang: str) -> list[EditCase]:
    corpus = f"humanevalfix-{lang}"
    cases = []
    for row in _read_jsonl(_data_file("humanevalpack", f"humanevalpack_{lang}.jsonl")):
        instruction = f"Fix bugs in {row['entry_point']}."
        fields = {key: row[key] for key in ("test", "entry_point", "declaration", "import", "test_setup",
                                            "bug_type", "failure_symptoms") if key in row}
        cases.append(EditCase(
            id=row["task_id"], corpus=corpus, language=_LANGUAGE_NAMES[lang],
            input=row["declaration"] + row["buggy_solution"], gold=row["declaration"] + row["canonical_solution"],
            instruction=instruction, instructions={"fix": instruction}, test=row["test"], test_fields=fields,
        ))
    return cases


def _load_canitedit() -> list[EditCase]:
    cases = []
    for row in _read_jsonl(_data_file("canitedit", "canitedit_test.jsonl")):
        instructions = {"descriptive": row["instruction_descriptive"], "lazy": row["instruction_lazy"]}
        cases.append(EditCase(
            id=str(row.get("full_name") or row["id"]), corpus=CANITEDIT, language="python",
            input=row["before"], gold=row["after"], instruction=instructions["descriptive"],
            instructions=instructions, test=row["tests"],
            test_fields={"tests": row["tests"], "name": row.get("name", ""),
                         "taxonomy": json.dumps(row.get("taxonomy", {}), sort_keys=True)},
        ))
    return cases


def load_corpus(name: str) -> list[EditCase]:
    """All cases of one corpus, in file order. Raises :class:`CorpusError` for an unknown name."""
    if name == CANITEDIT:
        return _load_canitedit()
    if name.startswith("humanevalfix-") and name.removeprefix("humanevalfix-") in HUMANEVALFIX_LANGUAGES:
        return _load_humanevalfix(name.removeprefix("humanevalfix-"))
    raise CorpusError(f"unknown corpus {name!r}; choose one of {', '.join(corpus_names())} or {ALL}")


def load_corpora(name: str = ALL) -> dict[str, list[EditCase]]:
    """``{corpus name: cases}`` for one corpus or, with ``"all"``, for every corpus."""
    names = corpus_names() if name == ALL else [name]
    return {corpus: load_corpus(corpus) for corpus in names}
