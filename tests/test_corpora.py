"""Corpus loaders and the oracle round-trip on every real case (data from ../shared, read in place)."""

from __future__ import annotations

import pytest

from engine.core.tokens import token_pieces
from engine.evaluation.corpora import (
    CANITEDIT,
    SHARED_ENV,
    CorpusError,
    EditCase,
    corpus_names,
    load_corpora,
    load_corpus,
    shared_dir,
)
from engine.language.oracle import line_oracle, token_oracle
from engine.language.resolve import resolve

EXPECTED_COUNTS = {**{f"humanevalfix-{lang}": 164 for lang in ("python", "js", "cpp", "go", "java", "rust")},
                   CANITEDIT: 105}


@pytest.fixture(scope="module")
def corpora():
    return load_corpora("all")


@pytest.fixture(scope="module")
def default_tokenizer():
    from engine.runtime.sources import load_tokenizer

    return load_tokenizer("default")


def test_corpus_names():
    assert set(corpus_names()) == set(EXPECTED_COUNTS)


def test_counts_and_records(corpora):
    assert {name: len(cases) for name, cases in corpora.items()} == EXPECTED_COUNTS
    for name, cases in corpora.items():
        assert len({case.id for case in cases}) == len(cases), f"{name}: duplicate ids"
        for case in cases:
            assert isinstance(case, EditCase) and case.corpus == name
            assert case.input and case.gold and case.instruction and case.test
            assert case.instruction in case.instructions.values()
        assert sum(case.input != case.gold for case in cases) >= len(cases) - 2, f"{name}: edits are missing"


def test_humanevalfix_fields(corpora):
    case = corpora["humanevalfix-python"][0]
    assert case.id == "Python/0" and case.language == "python"
    assert case.instruction == "Fix bugs in has_close_elements."
    assert case.input.startswith(case.test_fields["declaration"]) and case.gold.startswith(case.test_fields["declaration"])
    assert "distance = elem - elem2" in case.input and "distance = abs(elem - elem2)" in case.gold
    assert case.test_program() == case.gold + "\n" + case.test
    assert case.test_program("X") == "X\n" + case.test
    assert case.test.rstrip().endswith("check(has_close_elements)")
    go = corpora["humanevalfix-go"][0]
    assert go.test_program().startswith("package main") and go.test_fields["import"] in go.test_program()
    assert corpora["humanevalfix-rust"][0].test_program().startswith("fn main(){}\n")
    assert {c.language for c in corpora["humanevalfix-js"]} == {"javascript"}


def test_canitedit_fields(corpora):
    case = corpora[CANITEDIT][0]
    assert case.language == "python" and case.id == "1_cipher"
    assert set(case.instructions) == {"descriptive", "lazy"}
    assert case.instruction == case.instructions["descriptive"] != case.instructions["lazy"]
    assert case.test_program() == case.gold + "\n" + case.test
    assert "assert" in case.test
    hash(case)  # frozen, hashable despite the mapping fields


def test_records_are_frozen(corpora):
    case = corpora["humanevalfix-js"][0]
    with pytest.raises(AttributeError):
        case.gold = "x"  # type: ignore[misc]


def test_every_case_round_trips_through_its_line_oracle(corpora):
    failures = []
    for name, cases in corpora.items():
        for case in cases:
            program = line_oracle(case.input, case.gold)
            if resolve(program.serialize(), case.input, mode="strict").text != case.gold:
                failures.append(f"{name}:{case.id}")
    assert not failures


@pytest.mark.model
@pytest.mark.parametrize("name", ["humanevalfix-python", "humanevalfix-js", CANITEDIT])
def test_every_case_round_trips_through_its_token_oracle(corpora, default_tokenizer, name):
    from engine.bench.analysis import batch_encode

    tok = default_tokenizer
    cases = corpora[name]
    src_all = batch_encode(tok, [c.input for c in cases])
    gold_all = batch_encode(tok, [c.gold for c in cases])
    failures = []
    for case, src_ids, gold_ids in zip(cases, src_all, gold_all):
        src_pieces, gold_pieces = token_pieces(tok, src_ids), token_pieces(tok, gold_ids)
        for m in (1, 8):
            program = token_oracle(case.input, case.gold, src_ids, src_pieces, gold_ids, gold_pieces, min_span=m)
            if resolve(program.serialize(), case.input, token_pieces=src_pieces).text != case.gold:
                failures.append(f"{case.id} m={m}")
    assert not failures


def test_missing_shared_folder_is_a_clear_error(tmp_path, monkeypatch):
    missing = tmp_path / "nowhere"
    monkeypatch.setenv(SHARED_ENV, str(missing))
    with pytest.raises(CorpusError, match=f"shared folder not found: {missing}.*{SHARED_ENV}"):
        load_corpus("humanevalfix-python")
    with pytest.raises(CorpusError, match="shared folder not found"):
        shared_dir()


def test_missing_corpus_file_is_a_clear_error(tmp_path, monkeypatch):
    (tmp_path / "data" / "humanevalpack").mkdir(parents=True)
    monkeypatch.setenv(SHARED_ENV, str(tmp_path))
    with pytest.raises(CorpusError, match="humanevalpack_python.jsonl"):
        load_corpus("humanevalfix-python")
    with pytest.raises(CorpusError, match="canitedit_test.jsonl"):
        load_corpus(CANITEDIT)


def test_env_var_points_at_another_copy(tmp_path, monkeypatch):
    folder = tmp_path / "data" / "canitedit"
    folder.mkdir(parents=True)
    (folder / "canitedit_test.jsonl").write_text(
        '{"id": 7, "full_name": "7_x", "before": "a\\n", "after": "b\\n", "instruction_descriptive": "D",'
        ' "instruction_lazy": "L", "tests": "assert True"}\n', encoding="utf-8")
    monkeypatch.setenv(SHARED_ENV, str(tmp_path))
    (case,) = load_corpus(CANITEDIT)
    assert (case.id, case.input, case.gold, case.instruction, case.instructions["lazy"]) == ("7_x", "a\n", "b\n", "D", "L")


def test_unknown_corpus():
    with pytest.raises(CorpusError, match="unknown corpus 'humanevalfix-cobol'.*canitedit"):
        load_corpus("humanevalfix-cobol")
