"""The structure-aware merge (engine.apply.structure): definitions matched by kind, name and
nesting in every language the grammar pack parses, the line rules where nothing parses, the
file's own blank lines where the update's code meets it, and what a refusal names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.apply.align import align
from engine.apply.definitions import parse_definitions
from engine.apply.job import aligned
from engine.apply.plan import plan
from engine.apply.structure import merged_alignment
from engine.cli import main
from engine.core.choices import never_cancelled
from engine.decoding.events import EditFinished, EditResult
from engine.decoding.request import EditRequest
from engine.dispatch import ModelFree
from engine.verdict import EXIT_UNPLACED

PY = '''import os


def foo(a):
    x = a + 1
    y = x * 2
    return y


def low_stock(items, limit):
    out = [i for i in items if i.count < limit]
    out.sort()
    return out


def baz(c):
    return c * 3
'''

PY_CLASS = '''class Store:
    def add(self, item):
        self.items.append(item)

    def low_stock(self, limit):
        out = [i for i in self.items if i.count < limit]
        return out

    def total(self):
        return len(self.items)
'''

JS = '''import { a } from "./a";

export class Cart {
  constructor() {
    this.items = [];
  }

  add(item) {
    this.items.push(item);
    return this;
  }

  total() {
    return this.items.length;
  }
}

export function one(x) {
  return x + 1;
}
'''

TS = '''export interface Item {
  name: string;
}

export class Shelf {
  private items: Item[] = [];

  put(item: Item): void {
    this.items.push(item);
  }

  count(): number {
    return this.items.length;
  }
}
'''

GO = '''package store

import "fmt"

type Store struct {
\titems []string
}

func (s *Store) Add(item string) {
\ts.items = append(s.items, item)
}

func LowStock(items []string, limit int) []string {
\tout := []string{}
\tfor _, i := range items {
\t\tif len(i) < limit {
\t\t\tout = append(out, i)
\t\t}
\t}
\treturn out
}

func Describe(s *Store) string {
\treturn fmt.Sprint(len(s.items))
}
'''

RUST = '''use std::fmt;

pub struct Store {
    items: Vec<String>,
}

impl Store {
    pub fn add(&mut self, item: String) {
        self.items.push(item);
    }

    pub fn low_stock(&self, limit: usize) -> Vec<&String> {
        let out = self.items.iter().filter(|i| i.len() < limit).collect();
        out
    }
}

fn helper(x: u32) -> u32 {
    x + 1
}
'''

JAVA = '''package store;

import java.util.List;

public class Store {
    private final List<String> items;

    public Store(List<String> items) {
        this.items = items;
    }

    public int total() {
        return items.size();
    }

    @Override
    public String toString() {
        return "Store";
    }
}
'''


def merged(text: str, update: str, language: str, **given) -> EditResult:
    events = list(aligned("test", EditRequest(text, "", update=update, language=language, **given), never_cancelled))
    result = events[-1].result if isinstance(events[-1], EditFinished) else None
    assert result is not None
    return result


def test_a_whole_function_without_markers_replaces_its_namesake() -> None:
    update = "def foo(a):\n    z = a * 10\n    if z > 3:\n        return 0\n    return z\n"
    result = merged(PY, update, "python")
    want = PY.replace("    x = a + 1\n    y = x * 2\n    return y\n", "    z = a * 10\n    if z > 3:\n        return 0\n"
                      "    return z\n")
    assert result.output_text == want and result.stop_reason == "done"
    assert "x = a + 1" not in result.output_text  # no dead old body below the new one
    assert any("replaced whole" in w and "foo" in w for w in result.warnings)


def test_the_line_rules_alone_left_the_old_body_in() -> None:
    """The shape the structure-aware merge exists for: the line rules keep the old body."""
    update = "def foo(a):\n    z = a * 10\n    if z > 3:\n        return 0\n    return z\n"
    file, upd = PY.splitlines(True), update.splitlines(True)
    lines_only = "".join(step.text for step in plan(align(file, upd), file, upd))
    assert "y = x * 2" in lines_only and "z = a * 10" in lines_only


def test_a_marker_inside_keeps_the_part_it_stands_for() -> None:
    result = merged(PY, "def foo(a):\n    # ... existing code ...\n    return y + 1\n", "python")
    assert result.output_text == PY.replace("return y\n", "return y + 1\n")


def test_a_class_cut_short_before_a_marker_keeps_the_rest_of_its_body() -> None:
    """A class shown down to its docstring, then a marker at the margin: the marker stands for the
    rest of the class (its fields), not for nothing after a class replaced whole (its docstring
    reworded, so the line rules alone cannot see that it is cut short)."""
    text = ('import os\n\n\n@dataclass\nclass Layer:\n    """One source\'s keys."""\n\n    source: str\n'
            '    values: dict = None\n\n\ndef parse(raw):\n    return raw\n')
    update = ('# ... existing code ...\nimport sys\n# ... existing code ...\n@dataclass\nclass Layer:\n'
              '    """One source\'s validated keys."""\n# ... existing code ...\n')
    result = merged(text, update, "python")
    assert result.stop_reason == "done"
    assert "    source: str\n    values: dict = None\n" in result.output_text and "import sys\n" in result.output_text
    assert "validated keys" in result.output_text


def test_a_rename_replaces_the_old_definition_and_is_named() -> None:
    update = ("# ... existing code ...\ndef understocked(items, limit):\n    out = [i for i in items if i.count < limit]\n"
              "    out.sort()\n    return out\n# ... existing code ...\n")
    result = merged(PY, update, "python")
    assert result.output_text == PY.replace("def low_stock(", "def understocked(")
    assert "renamed low_stock -> understocked" in result.warnings


def test_a_rename_with_a_new_body_goes_by_its_signature_and_place() -> None:
    update = ("def foo(a):\n    x = a + 1\n    y = x * 2\n    return y\n\n\ndef understocked(items, limit):\n"
              "    return sorted(i for i in items if i.count < limit)\n\n\ndef baz(c):\n    return c * 3\n")
    result = merged(PY, update, "python")
    assert "def low_stock" not in result.output_text and result.output_text.count("def understocked") == 1
    assert "renamed low_stock -> understocked" in result.warnings


def test_a_new_definition_goes_where_its_neighbours_put_it() -> None:
    update = "def baz(c):\n    return c * 3\n\n\ndef qux(d):\n    return d\n"
    result = merged(PY, update + "", "python")
    assert result.output_text == PY + "\n\ndef qux(d):\n    return d\n"


def test_a_deletion_is_shown_by_neighbours_standing_adjacent() -> None:
    update = "# ... existing code ...\ndef foo(a):\n    x = a + 1\n    y = x * 2\n    return y\n\n\ndef baz(c):\n" \
             "    return c * 3\n"
    result = merged(PY, update, "python")
    assert "low_stock" not in result.output_text and result.output_text.endswith("    return y\n\n\ndef baz(c):\n"
                                                                                  "    return c * 3\n")


def test_a_method_shown_without_its_class_is_reindented_into_it() -> None:
    update = "def low_stock(self, limit):\n    return [i for i in self.items if i.count < limit]\n"
    result = merged(PY_CLASS, update, "python")
    assert result.output_text == PY_CLASS.replace(
        "        out = [i for i in self.items if i.count < limit]\n        return out\n",
        "        return [i for i in self.items if i.count < limit]\n")


def test_a_class_shown_with_one_method_keeps_the_others() -> None:
    update = "class Store:\n    def total(self):\n        return sum(1 for _ in self.items)\n"
    result = merged(PY_CLASS, update, "python")
    assert result.output_text == PY_CLASS.replace("return len(self.items)", "return sum(1 for _ in self.items)")


def test_a_decorated_and_a_nested_definition() -> None:
    text = "def outer():\n    def inner(x):\n        return x\n\n    return inner\n\n\ndef other():\n    pass\n"
    update = "def outer():\n    # ... existing code ...\n    @cache\n    def inner(x):\n        return x * 2\n" \
             "    # ... existing code ...\n"
    result = merged(text, update, "python")
    assert result.output_text == text.replace("    def inner(x):\n        return x\n",
                                              "    @cache\n    def inner(x):\n        return x * 2\n")


def test_javascript_class_method() -> None:
    update = "export class Cart {\n  // ... existing code ...\n  add(item) {\n    this.items.unshift(item);\n  }\n" \
             "  // ... existing code ...\n}\n"
    result = merged(JS, update, "javascript")
    assert result.output_text == JS.replace("    this.items.push(item);\n    return this;\n",
                                            "    this.items.unshift(item);\n")


def test_typescript_method_without_markers() -> None:
    update = "  count(): number {\n    const n = this.items.length;\n    return n;\n  }\n"
    result = merged(TS, update, "typescript")
    assert result.output_text == TS.replace("    return this.items.length;\n",
                                            "    const n = this.items.length;\n    return n;\n")


def test_go_function_and_method() -> None:
    update = "func LowStock(items []string, limit int) []string {\n\treturn nil\n}\n"
    result = merged(GO, update, "go")
    start = GO.index("func LowStock")
    end = GO.index("func Describe")
    assert result.output_text == GO[:start] + update + "\n" + GO[end:]
    method = "func (s *Store) Add(item string) {\n\ts.items = append([]string{item}, s.items...)\n}\n"
    assert "append([]string{item}" in merged(GO, method, "go").output_text
    assert merged(GO, method, "go").output_text.count("func (s *Store) Add") == 1


def test_rust_impl_method_and_rename() -> None:
    update = "impl Store {\n    // ... existing code ...\n    pub fn understocked(&self, limit: usize) -> Vec<&String> {\n" \
             "        let out = self.items.iter().filter(|i| i.len() < limit).collect();\n        out\n    }\n}\n"
    result = merged(RUST, update, "rust")
    assert result.output_text == RUST.replace("pub fn low_stock(", "pub fn understocked(")
    assert "renamed low_stock -> understocked" in result.warnings


def test_java_method_with_annotation_and_signature_change() -> None:
    update = "    @Override\n    public String toString(boolean full) {\n        return full ? \"Store \" + items : \"Store\";\n" \
             "    }\n"
    result = merged(JAVA, update, "java")
    assert result.output_text == JAVA.replace('    public String toString() {\n        return "Store";\n',
                                              '    public String toString(boolean full) {\n'
                                              '        return full ? "Store " + items : "Store";\n')


def test_definitions_have_nesting_paths() -> None:
    defs = parse_definitions(PY_CLASS.splitlines(True), "python")
    assert defs is not None and [d.dotted for top in defs for d in top.walk()] == [
        "Store", "Store.add", "Store.low_stock", "Store.total"]
    rust = parse_definitions(RUST.splitlines(True), "rust")
    assert rust is not None and "Store.low_stock" in [d.dotted for top in rust for d in top.walk()]


def test_the_line_rules_apply_where_nothing_parses() -> None:
    # a fragment of a body (indented lines that are no definition): the line rules place it
    update = "    x = a + 5\n    y = x * 2\n"
    result = merged(PY, update, "python")
    assert result.output_text == PY.replace("a + 1", "a + 5")
    # a language the pack does not parse
    assert merged("a = 1\nb = 2\nc = 3\n", "a = 1\nb = 5\nc = 3\n", "").output_text == "a = 1\nb = 5\nc = 3\n"


def test_a_grammar_that_fails_to_load_says_so(monkeypatch) -> None:
    from engine.apply import definitions

    def broken(grammar: str) -> None:  # a fake: a grammar that cannot load cannot be made otherwise
        raise OSError("no such grammar")

    monkeypatch.setattr(definitions, "_parser", broken)
    result = merged_alignment(PY.splitlines(True), "def baz(c):\n    return c * 4\n".splitlines(True), "python")
    assert any("grammar failed to load" in note and "line rules" in note for note in result.notes)


@pytest.mark.parametrize("update", [
    "def foo(a):\n    z = a\n    return z\n\n\n\n\ndef low_stock(items, limit):\n    return []\n",
    "def foo(a):\n    z = a\n    return z\ndef low_stock(items, limit):\n    return []\n",
])
def test_the_files_blank_lines_where_the_update_meets_it(update: str) -> None:
    result = merged(PY, "# ... existing code ...\n" + update + "# ... existing code ...\n", "python")
    want = PY.replace("    x = a + 1\n    y = x * 2\n    return y\n", "    z = a\n    return z\n").replace(
        "    out = [i for i in items if i.count < limit]\n    out.sort()\n    return out\n", "    return []\n")
    assert result.output_text == want


def test_no_whitespace_only_lines_invented_and_crlf_kept() -> None:
    crlf = PY.replace("\n", "\r\n")
    update = "def foo(a):\n    z = a\n    \n    return z\n"
    result = ModelFree().edit(EditRequest(crlf, "", update=update, language="python"))
    assert result.output_text == crlf.replace("    x = a + 1\r\n    y = x * 2\r\n    return y\r\n",
                                              "    z = a\r\n\r\n    return z\r\n")
    no_final = PY.rstrip("\n")
    assert not ModelFree().edit(EditRequest(no_final, "", update="def baz(c):\n    return c * 4\n", language="python")
                                ).output_text.endswith("\n")
    assert not merged(no_final, "def baz(c):\n    return c * 4\n", "python").output_text.endswith("\n")


def test_a_chunk_that_matches_nothing_names_the_nearest_rename() -> None:
    body = "(items, limit):\n    out = [i for i in items if i.count < limit]\n    out.sort()\n    return out\n"
    text = f"def check_a{body}\n\ndef check_b{body}"
    update = f"# ... existing code ...\ndef verify{body}# ... existing code ...\n"
    result = merged(text, update, "python")  # two namesakes as likely: no rename is guessed
    assert result.stop_reason == "unplaced" and result.output_text == text
    message = result.warnings[0]
    assert "no line matches `def verify(items, limit):`" in message
    assert "`def check_a(items, limit):` at line 1 has the same body: a rename?" in message
    assert "--partial" in message and "nothing was written" in message


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(["apply", *argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, " ".join(captured.err.split())


def test_cli_whole_function_without_markers_no_dead_code(capsys, tmp_path: Path) -> None:
    target, update = tmp_path / "shop.py", tmp_path / "answer.py"
    target.write_text(PY)
    update.write_text("def low_stock(items, limit):\n    return sorted(i for i in items if i.count < limit)\n")
    code, out, _ = run_cli(capsys, str(target), "--update", str(update), "--in-place", "--json")
    assert code == 0
    text = target.read_text()
    assert text.count("def low_stock") == 1 and "out.sort()" not in text
    assert text == PY.replace("    out = [i for i in items if i.count < limit]\n    out.sort()\n    return out\n",
                              "    return sorted(i for i in items if i.count < limit)\n")
    assert any("low_stock" in w for w in json.loads(out)["warnings"])


def test_cli_rename_is_named_and_refusal_names_partial(capsys, tmp_path: Path) -> None:
    target, update = tmp_path / "shop.py", tmp_path / "answer.py"
    target.write_text(PY)
    update.write_text("# ... existing code ...\ndef understocked(items, limit):\n    out = [i for i in items if "
                      "i.count < limit]\n    out.sort()\n    return out\n# ... existing code ...\n")
    code, out, _ = run_cli(capsys, str(target), "--update", str(update), "--json")
    assert code == 0 and "renamed low_stock -> understocked" in json.loads(out)["warnings"]
    update.write_text("# ... existing code ...\ndef zzz():\n    totally_new()\n# ... existing code ...\n")
    code, _, err = run_cli(capsys, str(target), "--update", str(update))
    assert code == EXIT_UNPLACED and "--partial" in err and "no line matches `def zzz():`" in err
    assert target.read_text() == PY


def test_a_new_definition_above_its_neighbour_keeps_both_separations() -> None:
    text = "export interface A {\n  a: string;\n}\n\n/** B's own comment. */\nexport interface B {\n  b: string;\n}\n"
    update = "/** New. */\nexport interface N {\n  n: number;\n}\n\n/** B's own comment. */\nexport interface B {\n" \
             "  b: string;\n}\n"
    result = merged(text, update, "typescript")
    assert result.output_text == text.replace("/** B's", "/** New. */\nexport interface N {\n  n: number;\n}\n\n/** B's")


def test_a_new_definition_between_two_markers_is_not_guessed() -> None:
    update = "# ...\ndef zz():\n    pass\n# ...\ndef baz(c):\n    return c * 4\n"
    result = merged(PY, update, "python")
    assert result.stop_reason == "unplaced" and result.output_text == PY


def test_a_file_nested_past_pythons_recursion_still_merges() -> None:
    depth = 1200
    text = "".join("    " * i + f"class C{i}:\n" for i in range(depth)) + "    " * depth + "x = 1\n"
    result = merged(text, "class C0:\n    # ... existing code ...\n", "python")
    assert result.stop_reason == "done" and result.output_text == text


def test_a_rename_with_a_new_body_between_markers_is_refused_naming_the_parameters() -> None:
    update = "# ... existing code ...\ndef understocked(items, limit):\n    return sorted(x for x in items if x.n < limit)\n" \
             "# ... existing code ...\n"
    result = merged(PY, update, "python")
    assert result.stop_reason == "unplaced" and result.output_text == PY
    assert "`def low_stock(items, limit):` at line 10 takes the same parameters: a rename?" in result.warnings[0]


BUILT = '''import os


def build():
    app = make()
    app.debug = False

    @app.route("/")
    def index():
        return "hi"

    return app


def collect(queue):
    items = list(queue)
    return items
'''


def test_a_body_shown_ending_right_above_the_next_definition_deletes_what_stood_between() -> None:
    update = "# ... existing code ...\n    app = make()\n    app.debug = False\n\ndef collect(queue):\n" \
             "# ... existing code ...\n"
    result = merged(BUILT, update, "python")
    assert result.stop_reason == "done"
    assert result.output_text == BUILT.replace('''
    @app.route("/")
    def index():
        return "hi"

    return app


def collect''', "\ndef collect")


def test_module_lines_shown_right_above_a_definition_delete_the_statements_between() -> None:
    text = "import json\nfrom pathlib import Path\n\nfrom engine.api import EditRequest\n\nIGNORE = -100\n\n\n" \
           "@dataclass\nclass Example:\n    ids: list\n"
    update = "# ... existing code ...\nfrom pathlib import Path\n\n@dataclass\nclass Example:\n# ... existing code ...\n"
    result = merged(text, update, "python")
    assert result.output_text == "import json\nfrom pathlib import Path\n\n@dataclass\nclass Example:\n    ids: list\n"


def test_file_lines_shown_right_below_a_definition_delete_the_statements_between() -> None:
    text = "def a():\n    return 1\n\n\nY = 2\n\n\nX = 1\n\n\ndef b():\n    return 2\n"
    update = "def a():\n    return 1\n\n\nX = 1\n# ... existing code ...\n"
    assert merged(text, update, "python").output_text == text.replace("Y = 2\n\n\n", "")


def test_a_deletion_whose_shown_lines_recur_with_no_copy_adjacent_is_refused() -> None:
    text = "def a():\n    return 1\n\n\ndef b():\n    return 1\n\n\nX = 2\n\n\ndef c():\n    pass\n"
    update = "# ... existing code ...\n    return 1\n\ndef c():\n# ... existing code ...\n"
    result = merged(text, update, "python")  # delete b and X, or X alone: the rules cannot tell
    assert result.stop_reason == "unplaced" and result.output_text == text


def test_a_definition_shown_up_to_its_middle_without_markers_is_refused_not_cut() -> None:
    text = "def plot(losses, path):\n    import matplotlib\n\n    matplotlib.use(\"Agg\")\n" \
           "    plt = matplotlib.pyplot\n    plt.plot(losses)\n    plt.savefig(path)\n"
    update = "def plot(losses, path):\n    import matplotlib_v2\n"
    result = merged(text, update, "python")  # its whole new body, or its first line changed
    assert result.stop_reason == "unplaced" and result.output_text == text
    found = []
    merged_alignment(text.splitlines(True), update.splitlines(True), "python", choices=found)
    assert found[0].rule is None and found[0].readings == ("replace plot whole", "change the start of plot, keep the rest")
    start = merged_alignment(text.splitlines(True), update.splitlines(True), "python", picks={found[0].key: 1})
    assert not start.unplaced and "".join(text.splitlines(True)[i] if s == "file" else start.update_lines[i]
                                          for s, i in start.lines) == text.replace("matplotlib\n", "matplotlib_v2\n", 1)


C_MIXED = '''/* Sum the first BITS integers, counting
   from zero.  */

static int
sum (int bits)
{
\tint i, total = 0;

\tfor (i = 0; i < bits; i++)
\t\ttotal += i;
\treturn total;
}
'''


def test_an_update_indented_as_the_file_already_indents_is_not_reindented() -> None:
    """A file of tabs whose comment continues on a line aligned with spaces: the update's
    space-indented line is that line's variant, not a line to re-indent with a tab."""
    update = "/* Sum the first BITS integers, counting\n   from one.  */\n"
    for result in (merged(C_MIXED, update, "c"), ModelFree().edit(EditRequest(C_MIXED, "", update=update, language="c"))):
        assert result.output_text == C_MIXED.replace("from zero", "from one")
