"""The structure-aware merge: an update's definitions matched with its file's by kind, name and
nesting (:mod:`engine.apply.definitions`), the line rules (:mod:`engine.apply.align`) only for what
lies between them.

* A definition the update shows without a marker inside replaces its namesake whole (a function;
  a class or other container is merged member by member, and the members it does not show stay).
* A marker inside a definition keeps the part it stands for: the line rules merge its inside.
* A definition shown at the margin that stands nested in the file (a method without its class)
  matches the one nested definition of its name, and is re-indented to it.
* A definition whose name changed, but whose body, signature or position says it is the old one,
  replaces it; the result names it (``renamed low_stock -> understocked``): a body alike, or a
  body somewhat alike with the same parameters or standing alone between the same neighbours, or
  the same parameters between the same neighbours. Of two such, the likelier (same parameters,
  then the body, then the name); a tie renames nothing. Each such reading is a :class:`Choice`
  (rename, or a new definition beside the old; of a tie, which) that a model may decide
  (engine.apply.choice); ``picks`` takes another reading than the rule's.
* A definition shown, in an update without markers, up to a line in its middle (each line a
  variant of the old one's line in its place) is its whole new text or only its changed start:
  the rules cannot tell, and refuse it (a :class:`Choice` a model may decide).
* A new definition, and any other code, is placed by the line rules between its matched
  neighbours; a deletion is shown by neighbours standing adjacent (in an update with markers):
  the file's lines the update shows with no marker between them and a matched definition are
  followed (or preceded) by that definition, what stood between deleted; where those lines stand
  in the file more than once and no copy is adjacent, the deletion is refused, not guessed.
* Between matched definitions the file's own blank-line separation is kept where the update
  shows only blank lines there.

Nothing here when the language has no grammar, the file or the update does not parse (a
fragment, a file already broken: error recovery may end a definition early), or no definition
matches: the line rules merge the whole update (:func:`merged_alignment`).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from engine.apply.align import PAIR_RATIO, Alignment, Choice, Source, Where, align, blank_as_file
from engine.apply.definitions import Definition, GrammarUnavailable, parse_definitions
from engine.apply.indent import leading, shifted, to_file_style
from engine.apply.markers import is_marker, marker_lines
from engine.core.lines import near_copy

RENAME_BODY = 0.6  # how alike two bodies must be for a definition of another name to be the old one
RENAME_HINTED = 0.25  # as alike, when the signature or the position says so too
START_RATIO = 0.85  # how alike a line must be to the old one's to be it, edited (a name or a number)
TOP, BOTTOM = "\0structure-top\n", "\0structure-bottom\n"  # sentinels that anchor a gap's ends
COMMENTS = ("#", "//", "/*", "*", "--", ";")  # a line that starts so is a comment (a new definition's)
TRIVIAL_SIGNATURES = {"", "()", "(self)", "(&self)", "(&mut self)", "(this)", "(cls)"}


@dataclass(frozen=True)
class Pair:
    """An update definition and the file definition it stands for; ``how``: "name", "nested"
    (the update shows it without its enclosing definitions), "renamed", or "beside" (a new
    definition, like the file's one, that goes right after it)."""

    update: Definition
    file: Definition
    how: str


def merged_alignment(file: Sequence[str], update: Sequence[str], language: str,
                     picks: Mapping[int, int] | None = None, choices: list[Choice] | None = None) -> Alignment:
    """The merge of ``update`` into ``file``: structure-aware where ``language`` parses and the
    update's definitions match the file's, the line rules otherwise (the result says why when a
    grammar failed to load). ``picks``: the reading to take at a :class:`Choice` (by its key;
    the rule's elsewhere); ``choices``: where given, the choices the merge met are added to it."""
    styled = blank_as_file(to_file_style(update, file), file)
    try:
        structured = structure_alignment(file, styled, language, picks, choices)
    except (GrammarUnavailable, RecursionError) as exc:  # (a file nested deeper than Python recurses)
        result = align(file, styled, own_comments=True, restyle=False, picks=picks, choices=choices)
        why = exc if isinstance(exc, GrammarUnavailable) else "the file nests too deep to read its definitions"
        result.notes.append(f"{why}: the line rules merged it")
        return result
    if structured is not None:
        return structured
    return align(file, styled, own_comments=True, restyle=False, picks=picks, choices=choices)


def structure_alignment(file: Sequence[str], styled: Sequence[str], language: str,
                        picks: Mapping[int, int] | None = None,
                        choices: list[Choice] | None = None) -> Alignment | None:
    """The structure-aware alignment of ``styled`` (an update in the file's indentation unit:
    engine.apply.indent.to_file_style) into ``file``, or None where it has nothing to go by
    (module docstring); ``picks`` and ``choices`` as :func:`merged_alignment`'s."""
    if not file or not styled:
        return None
    udefs = parse_definitions(_dedented(styled), language, whole=True, update=True)
    if not udefs:
        return None  # (before the file's parse, the longer one)
    fdefs = parse_definitions(file, language, whole=True)
    if not fdefs:
        return None
    merge = _Merge(file, list(styled), picks or {})
    pairs = merge.match(udefs, fdefs, bounded=False)
    if not pairs and not merge.ambiguous:
        return None
    merge.mark_new(udefs, pairs)
    merge.range(0, len(file), 0, len(styled), pairs, open_ends=True, has_markers=merge.has_markers)
    if choices is not None:
        choices.extend(merge.choices)
    return merge.alignment()


def _dedented(lines: Sequence[str]) -> list[str]:
    """``lines`` with the indentation all their non-blank lines share removed (a method shown
    without its class parses as a function); the lines stay where they are."""
    indents = [len(leading(line)) for line in lines if line.strip()]
    cut = min(indents, default=0)
    return [line[cut:] if line.strip() else line for line in lines] if cut else list(lines)


def _body(lines: Sequence[str], d: Definition) -> list[str]:
    return [line.strip() for line in lines[d.header + 1:d.end] if line.strip() and not is_marker(line)]


def _signature(line: str, name: str) -> str:
    """The parameters on a definition's header line (the text from the first ``(`` after its name
    to its match), spaces removed."""
    at = line.find(name)
    start = line.find("(", at + len(name) if at >= 0 else 0)
    if start < 0:
        return ""
    depth = 0
    for k in range(start, len(line)):
        depth += {"(": 1, ")": -1}.get(line[k], 0)
        if depth == 0:
            return "".join(line[start:k + 1].split())
    return ""


def _named_body(lines: Sequence[str], d: Definition) -> list[str]:
    """``d``'s body lines (:func:`_body`) with its own name unified."""
    name = re.compile(rf"\b{re.escape(d.name)}\b")
    return [name.sub("\0", line) for line in _body(lines, d)]


def body_likeness(a_lines: Sequence[str], a: Definition, b_lines: Sequence[str], b: Definition,
                  at_least: float = 0.0) -> float:
    """How alike two definitions' bodies are (0..1), the header lines left out, names unified;
    0.0 wherever a cheap upper bound shows it is below ``at_least``."""
    return likeness(_named_body(a_lines, a), _named_body(b_lines, b), at_least)


def likeness(left: list[str], right: list[str], at_least: float = 0.0) -> float:
    """:func:`body_likeness` of two bodies already read (:func:`_named_body`)."""
    if not left or not right:
        return 0.0
    matcher = difflib.SequenceMatcher(None, left, right, autojunk=False)
    if at_least > 0.0 and (matcher.real_quick_ratio() < at_least or matcher.quick_ratio() < at_least):
        return 0.0
    return matcher.ratio()


def same_signature(a_lines: Sequence[str], a: Definition, b_lines: Sequence[str], b: Definition) -> bool:
    """Whether two definitions take the same, telling, parameters."""
    left, right = _signature(a_lines[a.header], a.name), _signature(b_lines[b.header], b.name)
    return left == right and left not in TRIVIAL_SIGNATURES


class _Merge:
    """One structure-aware merge: the walk over matched definitions and the gaps between them."""

    def __init__(self, file: Sequence[str], update: list[str], picks: Mapping[int, int]):
        self.file, self.update = file, update
        self.picks = picks
        self.choices: list[Choice] = []  # where the rules left more than one reading
        self.markers = marker_lines(update, file)
        self.has_markers = bool(self.markers)
        self.update_lines = list(update)
        self.out: list[tuple[Source, int]] = []
        self.unplaced: list[tuple[int, int]] = []
        self.replaced: list[str] = []
        self.renamed: list[str] = []
        self.ambiguous: list[Definition] = []  # renames of two definitions at once: not placed
        self.new: set[int] = set()  # the lines of the update's definitions that match none: new ones

    def alignment(self) -> Alignment:
        notes = []
        if self.renamed:
            notes.append("renamed " + ", ".join(self.renamed))
        if self.replaced:
            notes.append("replaced whole (no marker inside): " + ", ".join(self.replaced))
        return Alignment(self.out, self.update_lines, self.unplaced, notes=notes)

    # Matching

    def match(self, udefs: list[Definition], fdefs: list[Definition], bounded: bool) -> list[Pair]:
        """The update's definitions (one level) paired with the file's (``fdefs``, one level; a
        definition shown without its enclosing ones may pair with one nested deeper), in the
        order both stand in. ``bounded``: the level is a definition's inside (its ends are known)."""
        pairs: list[Pair] = []
        used: set[int] = set()
        for u in udefs:
            same = [f for f in fdefs if f.name == u.name and f.kind == u.kind and id(f) not in used]
            if same:
                after = [f for f in same if not pairs or f.start >= pairs[-1].file.end] or same
                best = max(after, key=lambda f: self.kinship(u, f))  # the first of the best
                pairs.append(Pair(u, best, "name"))
                used.add(id(best))
                continue
            if not bounded:
                nested = [d for f in fdefs for d in f.walk()[1:] if d.name == u.name and d.kind == u.kind
                          and id(d) not in used]
                ranked = sorted((((self.kinship(u, d), round(body_likeness(self.update, u, self.file, d), 2)), d)
                                 for d in nested), key=lambda r: r[0])
                if ranked and (len(ranked) == 1 or ranked[-1][0] > ranked[-2][0]):
                    pairs.append(Pair(u, ranked[-1][1], "nested"))
                    used.add(id(ranked[-1][1]))
        pairs = _in_order(pairs)
        return _in_order(sorted([*pairs, *self.renames(udefs, fdefs, pairs, bounded)], key=lambda p: p.update.start))

    def mark_new(self, udefs: list[Definition], pairs: list[Pair]) -> None:
        """Remember the lines of ``udefs`` that no pair holds: new definitions."""
        matched = {id(p.update) for p in pairs} | {id(u) for u in self.ambiguous}
        self.new.update(j for u in udefs if id(u) not in matched for j in range(u.start, u.end))

    def kinship(self, u: Definition, f: Definition) -> tuple[bool, int]:
        """How surely namesakes are the same definition (an impl of one type may stand twice):
        the same header line, then how many of the update's members the file's holds."""
        names = {c.name for c in f.children}
        return self.update[u.header].strip() == self.file[f.header].strip(), sum(c.name in names for c in u.children)

    def renames(self, udefs: list[Definition], fdefs: list[Definition], pairs: list[Pair],
                bounded: bool) -> list[Pair]:
        """Pairs of an update definition no file definition is named as with the file definition,
        between the same matched neighbours, it renames (module docstring)."""
        taken = {id(p.update) for p in pairs} | {id(p.file) for p in pairs}
        found: list[Pair] = []
        for u in udefs:
            if id(u) in taken or u.kind != "function" or any(f.name == u.name for f in (
                    fdefs if bounded else [d for top in fdefs for d in top.walk()])):
                continue
            before = [p for p in pairs if p.update.end <= u.start]
            after = [p for p in pairs if p.update.start >= u.end]
            low = before[-1].file.end if before else 0
            high = after[0].file.start if after else 10 ** 9
            pool = fdefs if bounded else [d for f in fdefs for d in f.walk()]
            window = [f for f in pool if id(f) not in taken and f.kind == u.kind and low <= f.start and f.end <= high
                      and not any(p.file.start <= f.start < p.file.end for p in pairs)]
            between = [v for v in udefs if id(v) not in taken and (not before or v.start >= before[-1].update.end)
                       and (not after or v.end <= after[0].update.start)]
            enclosed = (bool(before) or bounded) and (bool(after) or bounded) and len(window) == 1 and len(between) == 1
            scored = []
            shown = _named_body(self.update, u)
            for f in window:
                if any(v.name == f.name for v in udefs):
                    continue
                signature = same_signature(self.update, u, self.file, f)
                hinted = signature or enclosed
                # (below what makes it a rename, the likeness is not needed exactly: skipped cheaply)
                floor = 0.0 if signature and enclosed else RENAME_HINTED if hinted else RENAME_BODY
                alike = likeness(shown, _named_body(self.file, f), at_least=floor)
                if alike >= RENAME_BODY or (hinted and alike >= RENAME_HINTED) or (signature and enclosed):
                    named = difflib.SequenceMatcher(None, u.name, f.name, autojunk=False).ratio()
                    scored.append(((signature, round(alike, 2), named), f))
            scored.sort(key=lambda s: s[0], reverse=True)
            if not scored:
                continue
            sure = len(scored) == 1 or scored[0][0] > scored[1][0]
            # A rename, or a new definition beside the old (the rule: the rename); of definitions
            # it may rename as likely but for their names, each (the rule: the likeliest name;
            # none, unplaced, when the names tie too), or new.
            olds = [f for s, f in scored if s[:2] == scored[0][0][:2]]
            readings = (*(f"rename {f.name} -> {u.name}" for f in olds), f"new {u.kind} {u.name}")
            self.choices.append(Choice(u.start, readings, 0 if sure else None))
            pick = self.picks.get(u.start, 0 if sure else None)
            if pick is None:  # two definitions it may rename, as likely: it is placed nowhere
                self.ambiguous.append(u)
            else:  # (a new one goes right after the old it is like, which stays)
                found.append(Pair(u, olds[pick % len(olds)], "renamed" if pick < len(olds) else "beside"))
                taken |= {id(u), id(olds[pick % len(olds)])}
        return found

    # Merging

    def range(self, fa: int, fb: int, ua: int, ub: int, pairs: list[Pair], open_ends: bool, has_markers: bool) -> None:
        """Merge update lines ``ua..ub`` into file lines ``fa..fb`` around ``pairs``; ``open_ends``:
        the range is the whole file, whose ends an update fragment need not show."""
        f_at, u_at = fa, ua
        for k, pair in enumerate(pairs):
            if pair.update.start < u_at:
                continue  # inside what a definition cut short took
            self.gap(f_at, pair.file.start, u_at, pair.update.start, open_ends and k == 0, False, has_markers)
            u_at = self.definition(pair)
            f_at = pair.file.end
        self.gap(f_at, fb, u_at, ub, open_ends and not pairs, open_ends, has_markers)

    def definition(self, pair: Pair) -> int:
        """Merge one matched definition; the update line after what it took."""
        u, f = pair.update, pair.file
        if pair.how == "renamed":
            self.renamed.append(f"{f.name} -> {u.name}")
        inside = any(u.start <= j < u.end for j in self.markers)
        offset = len(leading(self.file[f.start])) - len(leading(self.update[u.start]))
        if offset:
            for j in range(u.start, u.end):
                self.update_lines[j] = shifted(self.update[j], offset)
        if pair.how == "beside":
            self.beside(u, f)
            return u.end
        cut = not inside and self.marker_continues(u, f)
        if not inside and not cut and not self.has_markers and self.shows_start(u, f):
            return self.start_shown(u, f)
        if u.kind == "container" or inside or cut:
            end = self.next_line(u) + 1 if cut else u.end
            children = self.match(u.children, f.children, bounded=True)
            self.mark_new(u.children, children)
            if children:
                self.range(f.start, f.end, u.start, end, children, False, has_markers=inside or cut)
            else:  # (the blank lines between a definition cut short and its marker are the marker's)
                shown = [*range(u.start, u.end), end - 1] if cut else list(range(u.start, end))
                self.sub(f.start, f.end, shown, False, False, inside or cut)
            return end
        if pair.how != "renamed" and [line.strip() for line in self.update[u.start:u.end]] != [
                line.strip() for line in self.file[f.start:f.end]]:
            self.replaced.append(u.dotted)
        self.out.extend(("update", j) for j in range(u.start, u.end))
        return u.end

    def beside(self, u: Definition, f: Definition) -> None:
        """A new definition right after the file's one it is like (which stays), spaced as the
        file spaces that one from what follows it."""
        self.out.extend(("file", i) for i in range(f.start, f.end))
        count = 0
        while f.end + count < len(self.file) and not self.file[f.end + count].strip():
            count += 1
        blank = next((j for j in range(len(self.update)) if not self.update[j].strip()), None)
        if blank is not None:
            self.out.extend([("again", blank)] * max(count, 1))
        self.out.extend(("update", j) for j in range(u.start, u.end))

    def next_line(self, u: Definition) -> int:
        """The first non-blank update line after ``u``."""
        j = u.end
        while j < len(self.update) and not self.update[j].strip():
            j += 1
        return j

    def shows_start(self, u: Definition, f: Definition) -> bool:
        """The update shows only the start of the file's definition: each of its lines the file
        definition's line in the same place but for a small edit (:data:`START_RATIO`), and the
        file's goes on after them."""
        shown = [j for j in range(u.start, u.end) if self.update[j].strip()]
        own = [i for i in range(f.start, f.end) if self.file[i].strip()]
        return 2 <= len(shown) < len(own) and all(
            self.update[j].strip() == self.file[i].strip() or near_copy(self.update[j], self.file[i], START_RATIO)
            for j, i in zip(shown, own))

    def start_shown(self, u: Definition, f: Definition) -> int:
        """A definition shown up to a line in its middle, in an update without markers: its whole
        new text (the rest of the old deleted), or its first lines changed and the rest kept (an
        update without markers shows only what changed). The rules cannot tell: a :class:`Choice`
        whose rule places nothing (the chunk is reported unplaced); ``picks`` may take either."""
        readings = (f"replace {u.dotted} whole", f"change the start of {u.dotted}, keep the rest")
        self.choices.append(Choice(u.start, readings, None))
        pick = self.picks.get(u.start)
        if pick is None:
            self.unplaced.append((u.start, u.end))
            self.out.extend(("file", i) for i in range(f.start, f.end))
        elif pick % len(readings) == 0:
            self.replaced.append(u.dotted)
            self.out.extend(("update", j) for j in range(u.start, u.end))
        else:
            self.sub(f.start, f.end, list(range(u.start, u.end)), False, True, False)
        return u.end

    def marker_continues(self, u: Definition, f: Definition) -> bool:
        """A definition cut short before a marker (its last line one of the file definition's
        middle lines): the marker after it stands for the rest of its body."""
        j = self.next_line(u)
        if j >= len(self.update) or j not in self.markers:
            return False
        last = self.update[u.end - 1]
        body = [i for i in range(f.start, f.end) if self.file[i].strip()]
        if len(body) < 2 or near_copy(last, self.file[body[-1]], PAIR_RATIO):
            return False
        return any(near_copy(last, self.file[i], PAIR_RATIO) for i in body[:-1])

    def gap(self, fa: int, fb: int, ua: int, ub: int, left_open: bool, right_open: bool, has_markers: bool) -> None:
        """The lines between matched definitions: the file's when the update shows only blank
        lines or markers there (and, with markers in the update, a deletion when it shows
        neighbours adjacent); else the line rules with both matched ends as anchors."""
        shown = [j for j in range(ua, ub) if self.update[j].strip()]
        unchanged = False
        if any(j not in self.markers for j in shown) and (any(j in self.markers for j in shown) or not has_markers):
            known = {line.strip() for line in self.file[fa:fb]}
            unchanged = all(j in self.markers or self.update[j].strip() in known for j in shown)
        if unchanged and any(j not in self.markers for j in shown):  # only the file's own lines, and markers
            kept = self.shown_ends(fa, fb, ua, ub, shown, left_open, right_open) if has_markers else (fa, fb)
            if kept is not None:
                first, end = kept
                self.out.extend([*(("update", j) for j in range(ua, shown[0]) if first > fa),
                                 *(("file", i) for i in range(first, end)),
                                 *(("update", j) for j in range(shown[-1] + 1, ub) if end < fb)])
                return
        if all(j in self.markers for j in shown):
            keep = range(fa, fb)
            if has_markers and not shown and not (left_open or right_open):  # neighbours adjacent: a deletion
                lead = fa
                while lead < fb and not self.file[lead].strip():
                    lead += 1
                keep = range(fa, lead) if lead < fb else keep
            self.out.extend(("file", i) for i in keep)
            return
        content = [j for j in shown if j not in self.markers]
        deletion = has_markers and not (left_open or right_open) and not any(j in self.markers for j in shown)
        after = right_open and not left_open
        # (a marker between the new code and the neighbour it goes next to leaves its place open)
        beside = not any(j in self.markers for j in (range(ua, content[0]) if after else range(content[-1], ub))) \
            if content else False
        if beside and any(j in self.new for j in content) and not deletion and all(
                j in self.new or self.update[j].lstrip().startswith(COMMENTS) for j in content):
            self.insert_new(fa, fb, ua, ub, content, after)
            return
        doubtful = {j for u in self.ambiguous for j in range(u.start, u.end)}
        if doubtful & set(range(ua, ub)):
            self.unplaced.extend((u.start, u.end) for u in self.ambiguous if ua <= u.start < ub)
        start = len(self.out)
        self.sub(fa, fb, [j for j in range(ua, ub) if j not in doubtful], left_open, right_open, has_markers)
        self.separation(start, fa, fb, ua, ub)

    def shown_ends(self, fa: int, fb: int, ua: int, ub: int, shown: list[int], left_open: bool,
                   right_open: bool) -> tuple[int, int] | None:
        """Of a gap whose update lines are the file's own and markers: the file lines it keeps,
        ``(first, end)``. A run of the file's lines the update shows with no marker between it and
        a matched neighbour stands adjacent to that neighbour: the file's lines between the two are
        deleted (and the update's blank lines there are the separation). Where the run stands in
        the file more than once, none of them adjacent, the deletion cannot be told: the run is
        reported unplaced and the gap kept (``(fa, fb)``). None: the run's lines do not stand
        together in the file (the line rules merge the gap)."""
        rows = [i for i in range(fa, fb) if self.file[i].strip()]
        keys = [self.file[i].strip() for i in rows]
        cuts = [k for k, j in enumerate(shown) if j in self.markers]
        head = shown[:cuts[0]] if cuts and not left_open else []
        tail = shown[cuts[-1] + 1:] if cuts and not right_open else []
        low, high = 0, len(rows)
        if head:
            found = _occurrences(keys, [self.update[j].strip() for j in head], low, high)
            if not found:
                return None
            if found[0] != low and len(found) > 1:
                self.unplaced.append((head[0], head[-1] + 1))
                return fa, fb
            low = found[0]
        if tail:
            run = [self.update[j].strip() for j in tail]
            found = _occurrences(keys, run, low + len(head), high)
            if not found:
                return None
            if found[-1] + len(run) != high and len(found) > 1:
                self.unplaced.append((tail[0], tail[-1] + 1))
                return fa, fb
            high = found[-1] + len(run)
        first = rows[low] if head and low > 0 else fa
        end = rows[high - 1] + 1 if tail and high < len(rows) else fb
        return first, end

    def content_bounds(self, fa: int, fb: int) -> tuple[int, int]:
        """File lines ``fa``-``fb`` without their leading and trailing blank lines: (first, end)."""
        first, end = fa, fb
        while first < fb and not self.file[first].strip():
            first += 1
        while end > first and not self.file[end - 1].strip():
            end -= 1
        return first, end

    def insert_new(self, fa: int, fb: int, ua: int, ub: int, content: list[int], after: bool) -> None:
        """New definitions (and their comments) where the update puts them: right before the next
        matched definition, the file's lines there kept (``after``: right after the previous one,
        at the file's end of a range); spaced from their neighbours as the file spaces its own."""
        first, last = content[0], content[-1]
        body: list[tuple[Source, int]] = [("update", j) for j in range(first, last + 1) if j not in self.markers]
        f_lead, f_trail = self.content_bounds(fa, fb)
        blanks = [j for j in range(ua, ub) if not self.update[j].strip() and j not in self.markers]
        if after:
            own = [j for j in blanks if j < first]
            count = f_lead - fa if f_lead > fa else len(own)
            self.out.extend([*self.blank_lines(own, blanks, count), *body, *(("file", i) for i in range(fa, fb))])
            return
        # The next definition's own comment, shown above it, stays its own: the new code goes above it.
        shown = [j for j in range(first, last + 1) if self.update[j].strip() and j not in self.markers]
        kept = 0
        while kept < len(shown) and fb - 1 - kept >= fa and shown[-1 - kept] not in self.new and \
                self.update[shown[-1 - kept]].strip() == self.file[fb - 1 - kept].strip():
            kept += 1
        if kept:
            cut = shown[-kept]
            body = [item for item in body if item[1] < cut]
            while body and not self.update[body[-1][1]].strip():
                body.pop()
            fb_new = fb - kept
            gap_end = fb_new
            while gap_end > fa and not self.file[gap_end - 1].strip():
                gap_end -= 1
            count = fb_new - gap_end
            own = [j for j in blanks if last_before(body) < j < cut]
            self.out.extend([*(("file", i) for i in range(fa, fb_new)), *body, *self.blank_lines(own, blanks, count),
                             *(("file", i) for i in range(fb_new, fb))])
            return
        own = [j for j in blanks if j > last]
        count = fb - f_trail if fb > f_trail else len(own)
        self.out.extend([*(("file", i) for i in range(fa, fb)), *body, *self.blank_lines(own, blanks, count)])

    @staticmethod
    def blank_lines(own: list[int], blanks: list[int], count: int) -> list[tuple[Source, int]]:
        """``count`` blank lines written from the update's (its own ones first)."""
        if len(own) >= count:
            return [("update", j) for j in own[:count]]
        spare = own or blanks
        if not spare:
            return [("update", j) for j in own]
        return [*(("update", j) for j in own), *(("again", spare[0]),) * (count - len(own))]

    def text(self, item: tuple[Source, int]) -> str:
        return self.file[item[1]] if item[0] == "file" else self.update_lines[item[1]]

    def separation(self, start: int, fa: int, fb: int, ua: int, ub: int) -> None:
        """The blank lines at the ends of a gap's merge (``self.out[start:]``) made the file's own:
        as many as the file has there, so that where the update's code meets the matched
        definitions the file's separation stays (an update's snippet spaces its code its own way)."""
        part = self.out[start:]
        if fa == fb:  # the file has nothing there (its end): the update's spacing is all there is
            return
        lead = next((k for k, item in enumerate(part) if self.text(item).strip()), len(part))
        if lead == len(part):
            return
        trail = next(k for k, item in enumerate(reversed(part)) if self.text(item).strip())
        f_lead, f_trail = self.content_bounds(fa, fb)
        head: list[tuple[Source, int]] = [("file", i) for i in range(fa, f_lead)]
        tail: list[tuple[Source, int]] = [("file", i) for i in range(f_trail, fb)]
        if f_lead == fb:  # the file's neighbours were adjacent: their separation on both sides
            blank = next((j for j in range(ua, ub) if not self.update[j].strip()), None)
            if blank is None:
                return
            tail = [("again", blank)] * (fb - fa)
        self.out[start:] = [*head, *part[lead:len(part) - trail], *tail]

    def sub(self, fa: int, fb: int, us: list[int], left_open: bool, right_open: bool, has_markers: bool) -> None:
        """The line rules on file lines ``fa..fb`` and the update lines ``us``, each end a sentinel
        anchor unless open."""
        head = [] if left_open else [TOP]
        tail = [] if right_open else [BOTTOM]
        file = [*head, *self.file[fa:fb], *tail]
        update = [*head, *(self.update_lines[j] for j in us), *tail]
        where = Where([-1] * len(head) + list(range(fa, fb)) + [-1] * len(tail),
                      [-1] * len(head) + list(us) + [-1] * len(tail))
        part = align(file, update, has_markers=has_markers, whole=False, own_comments=True, restyle=False,
                     picks=self.picks, choices=self.choices, where=where)
        shift = len(head)
        for source, index in part.lines:
            if source == "file":
                if 0 <= index - shift < fb - fa:
                    self.out.append(("file", fa + index - shift))
            elif 0 <= index - shift < len(us):
                self.out.append((source, us[index - shift]))
        for k, j in enumerate(us):
            self.update_lines[j] = part.update_lines[k + shift]
        self.unplaced.extend((us[s - shift], us[e - 1 - shift] + 1) for s, e in part.unplaced)


def _occurrences(keys: list[str], run: list[str], low: int, high: int) -> list[int]:
    """Where ``run`` stands as consecutive items of ``keys[low:high]`` (its first item's index)."""
    return [k for k in range(low, high - len(run) + 1) if keys[k:k + len(run)] == run]


def last_before(body: list[tuple[Source, int]]) -> int:
    """The last update line ``body`` writes (-1 when none)."""
    return max((j for source, j in body if source == "update" and j >= 0), default=-1)


def _in_order(pairs: list[Pair]) -> list[Pair]:
    """The longest run of ``pairs`` (in update order) whose file definitions stand in the same
    order without overlapping."""
    best: list[list[Pair]] = []
    for k, pair in enumerate(pairs):
        chain = [pair]
        for j in range(k):
            if best[j] and best[j][-1].file.end <= pair.file.start and len(best[j]) + 1 > len(chain):
                chain = [*best[j], pair]
        best.append(chain)
    return max(best, key=len, default=[])
