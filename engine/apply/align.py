"""The aligner: where each line of the merged file comes from, decided by rules (no model).

The update's lines are matched with the file's (:class:`difflib.SequenceMatcher` over their text
without trailing blanks, after :mod:`engine.apply.indent` re-indented the update to the file's
style). Matched lines are anchors; between two anchors the update's lines replace the file's,
unless marker comments stand there (:mod:`engine.apply.markers`):

* a marker keeps the file's lines it stands for: an indented marker those up to the end of the
  file's block it is indented into (``def f(): / # ... / return 2`` keeps ``f``'s body up to its
  last line, which ``return 2`` replaces), a marker at the left margin those up to the next anchor;
* update lines next to a kept run replace the file's lines they are variants of
  (:func:`engine.core.lines.near_copy`) and are inserted otherwise;
* before the first anchor and after the last the file is kept (an update is a fragment of its
  file), unless a marker says where the update's lines go (the file's start or end); there the
  update's lines next to the anchor replace the file's they are variants of, unless they are
  only braces and blank lines (which end a new block as well as an old one);
* an update line that stands next to an anchor on one side only (the update's first or last
  line, or one next to a marker) and is a variant of the file line beyond it but not that line
  (:data:`CHOICE_RATIO` alike or more) is an edit of it or a new line beside it: the update reads
  the same either way. The rule pairs it at :data:`PAIR_RATIO`; each such place is a
  :class:`Choice` (``replace``, ``insert``) keyed ``-(update line + 1)``, named in the result
  and always the rule's (:attr:`Choice.model_decides`);
* an update without markers at all shows only what changed: a gap between two anchors where it
  has no code keeps the file's lines there;
* code the update shows that recurs in the file (two functions alike) is anchored where it stands
  as close to the other anchors as in the update and where the lines it changes are most alike
  the update's, not at its first copy;
* the file's own lines shown after a marker and right before an anchor, which recur (no anchor
  of their own), stand adjacent to it: the file's lines between their one copy and the anchor
  are deleted; with several copies, none adjacent, the chunk is reported, not guessed;
* a chunk between two markers with no anchor goes where its lines rewrite as many consecutive file
  lines, each a variant of the one it replaces (the most alike such place); where none fits, or two
  fit as well, it cannot be placed: it is reported, not guessed.

An update without markers that is about as long as the file and matches its first and last
lines is the whole new file, taken as it is.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Literal, Mapping, Sequence

from engine.apply.indent import common_offset, leading, shifted, to_file_style
from engine.apply.markers import marker_lines
from engine.core.lines import near_copy

# "again": an update line (a blank one) written a second time, as a gen (copies move forward).
Source = Literal["file", "update", "again"]
PAIR_RATIO = 0.5  # how alike an update line and a file line must be for the one to replace the other
WHOLE_FILE_RATIO = 0.7  # an update this close in length to the file (either way) may be the whole file
STRONG_BLOCK = 3  # a matched block this long anchors even when its lines recur in the file
NEIGHBOUR_LINES = 3  # the update lines on each side of recurring code that say which copy it is
# How alike an update line next to an anchor on one side only and the file line beyond it must be
# (and not equal) for both readings to stand: an edit of that line, or a new line beside it. On
# twins whose update reads the same either way, the rule is wrong on one twin of every pair from
# 0.3 up (scripts/measure_line_choices.py, results/apply/line_choices.json).
CHOICE_RATIO = 0.4


@dataclass(frozen=True)
class Choice:
    """Where the rules leave more than one reading of an update: a definition of a new name that
    may rename one of the file's, or be new; a definition shown up to a line in its middle without
    markers, whole or only its start (engine.apply.structure); an update line next to an anchor
    on one side only that may edit the file line beyond it or stand beside it (the line rules).
    ``key``: what a merge's ``picks`` name (the update line a definition starts on; ``-(j + 1)``
    for the line rules' choice at update line ``j``); ``readings``: what each reading is, in
    words (``rename low_stock -> understocked``, ``replace line 12``, ``insert before line 13``);
    ``rule``: the reading the fixed rule takes (None: it takes none, and the chunk is left
    unplaced). ``model_decides``: whether a model of your own may decide it; the line rules'
    choice is the rule's alone, named in the result (on the apply bench's own cases the rule is
    right on 13 of 13 and the embedded model on 1: a likelihood favours the reading that keeps
    every line the instruction quotes; docs/benchmarks.md, "Replace or insert")."""

    key: int
    readings: tuple[str, ...]
    rule: int | None
    model_decides: bool = True


_HEADER = re.compile(r"^\s*(?:(?:export|default|async|pub|public|private|protected|static|final|abstract)\s+)*"
                     r"(?:def|class|function|fn|func|struct|enum|interface|impl|trait|type)\b\s*\*?\s*(?P<name>\w*)")


def _header_name(line: str) -> str | None:
    """The name a definition line defines (``def f(`` -> ``f``), or None for any other line."""
    match = _HEADER.match(line)
    return match.group("name") if match else None


def _key(line: str) -> str:
    return line.rstrip(" \t\r\n")


def _trivial(key: str) -> bool:
    """A line that proves nothing about where it stands: blank, or only brackets and punctuation."""
    return not any(ch.isalnum() or ch == "_" for ch in key)


def _blank(line: str) -> bool:
    return not line.strip()


@dataclass
class Alignment:
    """The merged file as a sequence of (source, 0-based line index), the update's chunks that
    could not be placed (0-based ``[start, end)`` update line ranges), and the update's lines as
    merged (re-indented to the file's style): ``update_lines[j]`` is what ("update", j) writes."""

    lines: list[tuple[Source, int]]
    update_lines: list[str]
    unplaced: list[tuple[int, int]] = field(default_factory=list)
    whole_file: bool = False
    notes: list[str] = field(default_factory=list)  # what the merge decided that a reader should know


def _anchors(update: Sequence[str], file: Sequence[str], markers: set[int], strip: bool) -> list[tuple[int, int]]:
    """Monotone (update index, file index) pairs of equal lines; marker lines never match, a
    short matched block whose lines all recur elsewhere in the file is dropped as chance, and so
    are a block's first lines up to a blank one when they are a brace and blank lines (the diff
    extends a match over them: a new block's closing brace matched with the one that ends the
    block before it in the file; a brace after the blank line opens the matched block)."""
    def key(line: str) -> str:
        return line.strip() if strip else _key(line)

    ukeys = [f"\0marker{j}" if j in markers else key(line) for j, line in enumerate(update)]
    fkeys = [key(line) for line in file]
    counts: dict[str, int] = {}
    for k in fkeys:
        counts[k] = counts.get(k, 0) + 1
    matcher = difflib.SequenceMatcher(lambda k: _trivial(k), ukeys, fkeys, autojunk=False)
    blocks: list[tuple[int, int, int]] = []
    for a, b, size in matcher.get_matching_blocks():
        junk = next((k for k in range(size) if not _trivial(ukeys[a + k])), size)
        cut = max((k + 1 for k in range(junk) if not ukeys[a + k]), default=0)
        if any(ukeys[a + k] for k in range(cut)):  # (a brace before the blank: it ends another block)
            a, b, size = a + cut, b + cut, size - cut
        if size == 0:
            continue
        strong = size >= STRONG_BLOCK or any(counts[fkeys[b + i]] == 1 and not _trivial(fkeys[b + i])
                                             for i in range(size))
        if strong:
            blocks.append((a, b, size))
    return [(a + i, b + i) for a, b, size in _compact(blocks, ukeys, fkeys) for i in range(size)]


def _compact(blocks: list[tuple[int, int, int]], ukeys: Sequence[str],
             fkeys: Sequence[str]) -> list[tuple[int, int, int]]:
    """Matched blocks ``(update index, file index, size)``, with each run of blocks that recurs in
    the file moved to the place it fits best. A run is blocks as far apart in the file as in the
    update; an update shows contiguous code, so of the places the run's lines recur the right one
    leaves as many file lines to its neighbours as the update does, and, of those, the one whose
    lines between the run's blocks are most like the update's (the changed lines are variants of
    the ones they replace). The diff alone takes the first place, which may be another copy of
    the code, and delete the code between it and the next match."""
    runs: list[list[tuple[int, int, int]]] = []
    for block in blocks:
        if runs and block[1] - runs[-1][-1][1] == block[0] - runs[-1][-1][0]:
            runs[-1].append(block)
        else:
            runs.append([block])
    for i, run in enumerate(runs):
        a0, b0, _ = run[0]
        span = run[-1][0] + run[-1][2] - a0
        inside = {a + k - a0 for a, _, size in run for k in range(size)}
        low = runs[i - 1][-1][1] + runs[i - 1][-1][2] if i > 0 else 0
        high = runs[i + 1][0][1] - span if i + 1 < len(runs) else len(fkeys) - span
        places = [at for at in range(low, high + 1)
                  if at != b0 and all(fkeys[at + o] == ukeys[a0 + o] for o in inside)]
        best = max(places, key=lambda at: _place_score(runs, i, at, inside, ukeys, fkeys), default=b0)
        if _place_score(runs, i, best, inside, ukeys, fkeys) > _place_score(runs, i, b0, inside, ukeys, fkeys):
            runs[i] = [(a, b - b0 + best, size) for a, b, size in run]
    return [block for run in runs for block in run]


def _place_score(runs: list[list[tuple[int, int, int]]], i: int, at: int, inside: set[int], ukeys: Sequence[str],
                 fkeys: Sequence[str]) -> tuple[int, float]:
    """How well run ``i`` fits at file line ``at``: minus how far the file lines to its
    neighbouring runs outnumber or fall short of the update's, then how alike the lines between
    its blocks are to the update's."""
    a0 = runs[i][0][0]
    span = runs[i][-1][0] + runs[i][-1][2] - a0
    mismatch = 0
    if i > 0:
        pa, pb, psize = runs[i - 1][-1]
        mismatch += abs((at - pb - psize) - (a0 - pa - psize))
    if i + 1 < len(runs):
        na, nb, _ = runs[i + 1][0]
        mismatch += abs((nb - at - span) - (na - a0 - span))
    offsets = [o for o in range(span) if o not in inside]
    # (and the update's unmatched lines right around the run: a changed line next to recurring
    # code tells its copies apart; up to the neighbouring run or a marker, a few lines each way)
    low = runs[i - 1][-1][0] + runs[i - 1][-1][2] if i > 0 else 0
    high = runs[i + 1][0][0] if i + 1 < len(runs) else len(ukeys)
    for step, start in ((-1, a0 - 1), (1, a0 + span)):
        for k in range(NEIGHBOUR_LINES):
            o = start + step * k
            if not low <= o < high or ukeys[o].startswith("\0marker") or not 0 <= at + o - a0 < len(fkeys):
                break
            offsets.append(o - a0)
    alike = sum(difflib.SequenceMatcher(None, ukeys[a0 + o], fkeys[at + o], autojunk=False).ratio()
                for o in offsets)
    return -mismatch, alike


def _is_whole_file(update: Sequence[str], file: Sequence[str], markers: set[int]) -> bool:
    if markers or not file:
        return not file
    if min(len(update), len(file)) < WHOLE_FILE_RATIO * max(len(update), len(file)):
        return False
    ukeys = [line.strip() for line in update if line.strip()]
    fkeys = [line.strip() for line in file if line.strip()]
    return bool(ukeys and fkeys) and ukeys[0] == fkeys[0] and ukeys[-1] == fkeys[-1]


@dataclass(frozen=True)
class Where:
    """Where the walk's lines stand in the whole file and update, for a part merged on its own
    (engine.apply.structure): each file and update line's 0-based index there (default: its own)."""

    files: Sequence[int] | None = None
    updates: Sequence[int] | None = None

    def file_line(self, i: int) -> int:
        """File line ``i``'s number (1-based) in the whole file."""
        return (self.files[i] if self.files is not None else i) + 1

    def update_index(self, j: int) -> int:
        return self.updates[j] if self.updates is not None else j


class _AnchorWalk:
    """The walk over anchors and the gaps between them (see the module docstring)."""

    def __init__(self, update: list[str], file: Sequence[str], markers: set[int], has_markers: bool | None = None,
                 picks: Mapping[int, int] | None = None, where: Where | None = None):
        self.update, self.file, self.markers = update, file, markers
        self.has_markers = bool(markers) if has_markers is None else has_markers
        self.out: list[tuple[Source, int]] = []
        self.unplaced: list[tuple[int, int]] = []
        self.picks = picks or {}
        self.where = where or Where()
        self.choices: list[Choice] = []

    def run(self, anchors: list[tuple[int, int]]) -> None:
        prev_u, prev_f = -1, -1
        for u, f in [*anchors, (len(self.update), len(self.file))]:
            gap_u = list(range(prev_u + 1, u))
            gap_f = list(range(prev_f + 1, f))
            left_open, right_open = prev_u < 0, u == len(self.update)
            self.gap(gap_u, gap_f, left_open, right_open,
                     left=self.file[prev_f] if prev_f >= 0 else None, right=self.file[f] if f < len(self.file) else None)
            if u < len(self.update):
                self.out.append(("file", f))
            prev_u, prev_f = u, f

    def near(self, u: int, f: int, strict: bool, ratio: float = PAIR_RATIO) -> bool:
        """May update line ``u`` replace file line ``f``: the same line, or a variant of it
        (``ratio`` alike); when ``strict``, a definition only one of the same name."""
        written, line = self.update[u], self.file[f]
        if _key(written) == _key(line):
            return True
        if strict and (_header_name(written) or _header_name(line)) and _header_name(written) != _header_name(line):
            return False
        return near_copy(written, line, ratio)

    def edge(self, seg: list[int], fs: list[int], forward: bool, strict: bool = False) -> int:
        """How many of ``seg``'s lines at its anchored end (its first when ``forward``) replace
        ``fs``'s there (:meth:`pair_forward`, :meth:`pair_backward`), where ``seg`` meets an anchor
        on that side only. When the update's line there is a variant of the file's but not that
        line (:data:`CHOICE_RATIO`), it may be an edit or a new line beside it: a :class:`Choice`,
        which ``picks`` may settle the other way."""
        pair = self.pair_forward if forward else self.pair_backward
        rule = pair(seg, fs, strict)
        if not seg or not fs:
            return rule
        j, i = (seg[0], fs[0]) if forward else (seg[-1], fs[-1])
        written, line = self.update[j], self.file[i]
        if _key(written) == _key(line) or _trivial(_key(written)) or not self.near(j, i, strict, CHOICE_RATIO):
            return rule
        near = pair(seg, fs, strict, CHOICE_RATIO)
        if near == 0:
            return rule
        span = [self.where.file_line(k) for k in (fs[:near] if forward else fs[len(fs) - near:])]
        lines = f"line {span[0]}" if len(span) == 1 else f"lines {span[0]}-{span[-1]}"
        readings = (f"replace {lines}", f"insert {'before' if forward else 'after'} line {self.where.file_line(i)}")
        key = -(self.where.update_index(j) + 1)
        self.choices.append(Choice(key, readings, 0 if rule else 1, model_decides=False))
        pick = self.picks.get(key)
        if pick is None:
            return rule
        return (rule or near) if pick % 2 == 0 else 0

    def telling(self, seg: list[int]) -> bool:
        """Whether update lines paired with the file's say that they replace them: one of them has
        a word (a brace and blank lines alone end every block, a new one's as well)."""
        return any(not _trivial(_key(self.update[j])) for j in seg)

    def pair_forward(self, seg: list[int], fs: list[int], strict: bool = False, ratio: float = PAIR_RATIO) -> int:
        """How many of ``seg``'s first lines replace ``fs``'s first lines. ``strict`` (no anchor
        next to them): none when a definition follows the paired lines in ``seg``, since the
        segment then adds code of its own rather than ending what it replaces."""
        k = 0
        while k < min(len(seg), len(fs)) and self.near(seg[k], fs[k], strict, ratio):
            k += 1
        if strict and any(_header_name(self.update[j]) for j in seg[k:]):
            return 0
        return k

    def pair_backward(self, seg: list[int], fs: list[int], strict: bool = False, ratio: float = PAIR_RATIO) -> int:
        """As :meth:`pair_forward` from the ends of ``seg`` and ``fs``."""
        k = 0
        while k < min(len(seg), len(fs)) and self.near(seg[-1 - k], fs[-1 - k], strict, ratio):
            k += 1
        if strict and any(_header_name(self.update[j]) for j in seg[:len(seg) - k]):
            return 0
        return k

    def closing(self, seg: list[int], fs: list[int], end: int) -> int:
        """How many of ``seg``'s last lines are the file's lines right after ``fs[:end]`` (a
        block's closing brace after the lines that replace the block's end)."""
        t = 0
        while t < len(seg) and end + t < len(fs) and _key(self.update[seg[len(seg) - 1 - t]]) == _key(
                self.file[fs[end + t]]):
            t += 1
        while t > 0 and _key(self.update[seg[len(seg) - t]]) != _key(self.file[fs[end]]):
            t -= 1
        return t

    def emit_update(self, seg: list[int]) -> None:
        self.out.extend(("update", j) for j in seg)

    def emit_file(self, fs: list[int]) -> None:
        self.out.extend(("file", i) for i in fs)

    def following_blanks(self, j: int) -> list[int]:
        """The blank update lines right after line ``j``."""
        k = j + 1
        while k < len(self.update) and _blank(self.update[k]) and k not in self.markers:
            k += 1
        return list(range(j + 1, k))

    def preceding_blanks(self, j: int) -> list[int]:
        """The blank update lines right before line ``j``."""
        k = j
        while k > 0 and _blank(self.update[k - 1]) and k - 1 not in self.markers:
            k -= 1
        return list(range(k, j))

    def separate(self, blanks: list[int], first: int) -> None:
        """Code inserted before an anchored run that the update separates from it by blank lines
        (a new function above its neighbour) is separated as much from the code before it."""
        previous = self.out[-1] if self.out else None
        if blanks and not _blank(self.update[first]) and previous is not None and previous[0] == "file" \
                and not _blank(self.file[previous[1]]):
            self.out.extend(("again", j) for j in blanks)

    def report(self, seg: list[int]) -> None:
        if any(not _blank(self.update[j]) for j in seg):
            self.unplaced.append((seg[0], seg[-1] + 1))

    def gap(self, us: list[int], fs: list[int], left_open: bool, right_open: bool,
            left: str | None, right: str | None) -> None:
        segments: list[list[int]] = [[]]
        marks: list[int] = []
        for j in us:
            if j in self.markers:
                marks.append(j)
                segments.append([])
            else:
                segments[-1].append(j)
        if not marks:
            self.plain_gap(segments[0], fs, left_open, right_open, left, right)
        else:
            self.marked_gap(segments, marks, fs, left_open, right_open)

    def plain_gap(self, seg: list[int], fs: list[int], left_open: bool, right_open: bool,
                  left: str | None, right: str | None) -> None:
        if left_open and right_open:  # no anchor and no marker anywhere: nothing to place it by
            self.report(seg)
            self.emit_file(fs)
        elif left_open:  # before the first anchor: the update's lines go right before it
            guard = bool(seg) and right is not None and len(leading(self.update[seg[-1]])) <= len(leading(right))
            q = self.edge(seg, fs, forward=False) if guard else 0
            q = q if self.telling(seg[len(seg) - q:]) else 0
            self.emit_file(fs[:len(fs) - q])
            if q == 0 and seg:
                self.separate(self.following_blanks(seg[-1]), seg[0])
            self.emit_update(seg)
        elif right_open:  # after the last anchor: right after it
            guard = bool(seg) and left is not None and len(leading(self.update[seg[0]])) >= len(leading(left))
            p = self.edge(seg, fs, forward=True) if guard else 0
            p = p if self.telling(seg[:p]) else 0
            self.emit_update(seg)
            if p == 0 and seg and fs and not _blank(self.file[fs[0]]):
                blanks = self.preceding_blanks(seg[0])
                if blanks and not _blank(self.update[seg[-1]]):
                    self.out.extend(("again", j) for j in blanks)
            self.emit_file(fs[p:])
        elif not self.has_markers and all(_blank(self.update[j]) for j in seg) and any(
                not _blank(self.file[i]) for i in fs):
            self.emit_file(fs)  # a fragment without markers skipped this code
        else:
            self.emit_update(seg)

    def locate(self, seg: list[int], fs: list[int], pos: int) -> int | None:
        """Where in ``fs`` (from ``pos``) the unanchored ``seg`` rewrites as many consecutive file
        lines, each of its lines a variant of the file line it replaces (a definition only one of
        the same name); of several such places the one most alike, None on a tie or none."""
        lines = [j for j in seg if not _blank(self.update[j])]
        if not lines or len(lines) != len(seg):
            return None
        fits = [p for p in range(pos, len(fs) - len(seg) + 1)
                if all(self.near(j, fs[p + k], strict=True) for k, j in enumerate(seg))]
        if len(fits) <= 1:
            return fits[0] if fits else None
        scored = sorted(((sum(difflib.SequenceMatcher(None, self.update[j].strip(), self.file[fs[p + k]].strip(),
                                                      autojunk=False).ratio() for k, j in enumerate(seg)), p)
                         for p in fits), reverse=True)
        return scored[0][1] if scored[0][0] > scored[1][0] else None

    def block_end(self, fs: list[int], pos: int, indent: int) -> int:
        """Where the file's block a marker indented by ``indent`` stands in ends: the first line
        from ``pos`` indented less (blank lines before it stay outside the block)."""
        end = pos
        while end < len(fs) and (_blank(self.file[fs[end]]) or len(leading(self.file[fs[end]])) >= indent):
            end += 1
        while end > pos and _blank(self.file[fs[end - 1]]):
            end -= 1
        return end

    def adjacent_run(self, seg: list[int], fs: list[int], pos: int) -> bool:
        """The file's own lines shown after a marker and right before an anchor: they stand
        adjacent to it, and the file's lines between their copy and the anchor are deleted (the
        update's blank lines after them the separation). Where they recur with no copy adjacent,
        the deletion cannot be told: the segment is reported and the file kept. False (nothing
        written): the segment is not such a run, or its copy already stands adjacent."""
        shown = [j for j in seg if not _blank(self.update[j])]
        rows = [i for i in fs[pos:] if not _blank(self.file[i])]
        keys = [_key(self.file[i]) for i in rows]
        run = [_key(self.update[j]) for j in shown]
        if not shown:
            return False
        found = [k for k in range(len(keys) - len(run) + 1) if keys[k:k + len(run)] == run]
        if not found or found[-1] + len(run) == len(keys):
            return False
        if len(found) > 1:
            self.report(seg)
            self.emit_file(fs[pos:])
            return True
        last = rows[found[0] + len(run) - 1]
        self.emit_file([i for i in fs[pos:] if i <= last])
        self.emit_update([j for j in seg if j > shown[-1]])
        return True

    def marked_gap(self, segments: list[list[int]], marks: list[int], fs: list[int], left_open: bool,
                   right_open: bool) -> None:
        first = segments[0]
        p = self.edge(first, fs, forward=True)
        self.emit_update(first)
        pos = p
        for i, mark in enumerate(marks, start=1):
            seg, last = segments[i], i == len(marks)
            indent = len(leading(self.update[mark]))
            closed = 0
            if indent > 0 and not left_open:  # (before the first anchor every file line is kept)
                end = self.block_end(fs, pos, indent)
                closed = self.closing(seg, fs, end)
            elif not last or (right_open and seg and self.locate(seg, fs, pos) is not None):
                # Between two markers at the margin (or after the last, where its lines are
                # variants of file lines) nothing was matched: the lines it rewrites place it.
                at = self.locate(seg, fs, pos)
                if at is None:
                    self.report(seg)
                    continue
                self.emit_file(fs[pos:at])
                self.emit_update(seg)
                pos = at + len(seg)
                continue
            else:
                end = len(fs)
                if not right_open and self.adjacent_run(seg, fs, pos):
                    pos = len(fs)
                    continue
            body = seg[:len(seg) - closed]
            q = self.edge(body, fs[pos:end], forward=False, strict=indent > 0 or right_open)
            self.emit_file(fs[pos:end - q])
            self.emit_update(body)
            self.emit_file(fs[end:end + closed])
            pos = end + closed
        if right_open:
            self.emit_file(fs[pos:])


def blank_as_file(lines: Sequence[str], file: Sequence[str]) -> list[str]:
    """``lines`` with their whitespace-only lines emptied, unless the file has such lines itself
    (an update's stray indentation on a blank line is not the file's)."""
    if any(line.strip() == "" and line.strip("\r\n") for line in file):
        return list(lines)
    return [line[len(line.rstrip("\r\n")):] if not line.strip() and line.strip("\r\n") else line for line in lines]


def align(file: Sequence[str], update: Sequence[str], *, has_markers: bool | None = None,
          whole: bool = True, own_comments: bool = False, restyle: bool = True,
          picks: Mapping[int, int] | None = None, choices: list[Choice] | None = None,
          where: Where | None = None) -> Alignment:
    """Align ``update`` (its lines) with ``file`` (its lines); see the module docstring.
    ``has_markers``: whether the update (of which ``update`` may be a part) elides code with
    markers anywhere (default: whether ``update`` has any); ``whole``: whether an update without
    markers may be taken as the whole new file; ``own_comments``: a comment that reads like a
    marker but stands in the file as it is, is the file's (engine.apply.markers.marker_lines);
    ``restyle``: re-indent the update to the file's unit (False: it was); ``picks``: the reading
    to take at a :class:`Choice` (by its key; the rule's elsewhere); ``choices``: where given, the
    choices the walk met are added to it; ``where``: the lines' places in a whole file and update
    (a part of them merged on its own), which the choices' keys and words name."""
    markers = marker_lines(update, file if own_comments else None)
    styled = blank_as_file(to_file_style(update, file), file) if restyle else list(update)
    loose = _anchors(styled, file, markers, strip=True)
    offset = common_offset([(styled[u], file[f]) for u, f in loose])
    merged = [shifted(line, offset) for line in styled]
    anchors = _anchors(merged, file, markers, strip=False)
    if whole and _is_whole_file(merged, file, markers):
        exact = dict(anchors)
        lines: list[tuple[Source, int]] = [("file", exact[j]) if j in exact else ("update", j)
                                           for j in range(len(merged))]
        return Alignment(lines, merged, whole_file=True)
    walk = _AnchorWalk(merged, file, markers, has_markers, picks, where)
    walk.run(anchors)
    if choices is not None:
        choices.extend(walk.choices)
    return Alignment(walk.out, merged, walk.unplaced)
