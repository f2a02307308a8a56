"""Decontamination: token 8-gram Jaccard similarity against the evaluation cases.

Tokens come from a simple regex code tokenizer (identifiers, numbers, single punctuation
characters; whitespace and layout ignored), the same for every language. The evaluation side is
indexed once (8-gram -> documents), so one query costs one dictionary lookup per 8-gram of the
query plus one division per evaluation document that shares any 8-gram with it.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

from engine.evaluation.corpora import load_corpora

NGRAM = 8
THRESHOLD = 0.5
_TOKEN = re.compile(r"[A-Za-z_$][\w$]*|\d+(?:\.\d+)?|\S")


def code_tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def ngrams(text: str, n: int = NGRAM) -> set[tuple[str, ...]]:
    tokens = code_tokens(text)
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


class NgramIndex:
    """Documents indexed by their token n-grams; :meth:`most_similar` is the max Jaccard over them."""

    def __init__(self, n: int = NGRAM) -> None:
        self.n = n
        self._labels: list[str] = []
        self._sizes: list[int] = []
        self._postings: dict[tuple[str, ...], list[int]] = {}

    def add(self, text: str, label: str) -> None:
        grams = ngrams(text, self.n)
        if not grams:
            return
        doc = len(self._labels)
        self._labels.append(label)
        self._sizes.append(len(grams))
        for gram in grams:
            self._postings.setdefault(gram, []).append(doc)

    def add_all(self, items: Iterable[tuple[str, str]]) -> "NgramIndex":
        for text, label in items:
            self.add(text, label)
        return self

    def __len__(self) -> int:
        return len(self._labels)

    def most_similar(self, text: str) -> tuple[float, str | None]:
        """``(jaccard, label)`` of the indexed document most similar to ``text`` (``(0.0, None)`` if none shares an n-gram)."""
        grams = ngrams(text, self.n)
        shared: Counter[int] = Counter()
        for gram in grams:
            for doc in self._postings.get(gram, ()):
                shared[doc] += 1
        best, label = 0.0, None
        for doc, inter in sorted(shared.items()):
            score = inter / (len(grams) + self._sizes[doc] - inter)
            if score > best:
                best, label = score, self._labels[doc]
        return best, label


def evaluation_index() -> NgramIndex:
    """Every HumanEvalPack (all languages) and CanItEdit case, input and gold, as one index.

    Raises ``engine.evaluation.corpora.CorpusError`` (with the fix) when the shared data folder is missing:
    a training set is never built without decontamination.
    """
    index = NgramIndex()
    for corpus, cases in load_corpora("all").items():
        for case in cases:
            index.add(case.input, f"{corpus}/{case.id}/input")
            index.add(case.gold, f"{corpus}/{case.id}/gold")
    return index
