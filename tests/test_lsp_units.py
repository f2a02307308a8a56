"""Unit tests of the language server's pure parts: positions, edits, actions, settings, queue."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types

from engine import settings as config
from engine.core.lines import split_lines
from engine.settings import Settings
from lsp_server import actions, edits, positions
from lsp_server.models import EditQueue, ModelKey, ModelPool
from lsp_server.workspace_config import FileLayers, WorkspaceConfig

# --- positions --------------------------------------------------------------------------------

EMOJI = "\U0001F600"          # 😀 : 1 code point, 2 UTF-16 units, 4 UTF-8 bytes
CJK = "\u4e2d\u6587"            # 中文: 2 code points, 2 UTF-16 units, 6 UTF-8 bytes
COMBINING = "e\u0301"           # é as e + combining acute: 2 code points


def reference_units(text: str, encoding: str) -> int:
    """Independent code-unit count (the codec's own encoder)."""
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    return len(text)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8", "utf-32"])
def test_units_match_the_real_encoders(encoding):
    for text in ["", "abc", EMOJI, CJK, COMBINING, f"x = '{EMOJI}{CJK}{COMBINING}'\t# ok"]:
        assert positions.units(text, encoding) == reference_units(text, encoding)


def test_positions_of_emoji_cjk_and_combining_characters():
    text = f"a{EMOJI}b\n{CJK}x{COMBINING}y\n"
    index = positions.LineIndex(text)
    b = text.index("b")
    assert index.position_at(b, "utf-16") == types.Position(line=0, character=3)
    assert index.position_at(b, "utf-8") == types.Position(line=0, character=5)
    assert index.position_at(b, "utf-32") == types.Position(line=0, character=2)
    y = text.index("y")
    assert index.position_at(y, "utf-16") == types.Position(line=1, character=5)
    assert index.position_at(y, "utf-8") == types.Position(line=1, character=10)
    for enc in ("utf-16", "utf-8", "utf-32"):
        assert index.offset_at(index.position_at(y, enc), enc) == y
    # inside a surrogate pair: rounds down to the emoji's start
    assert index.offset_at(types.Position(line=0, character=2), "utf-16") == 1


def test_line_breaks_follow_lsp_not_splitlines():
    text = "a\r\nb\rc\nd\u2028e\x0cf"
    index = positions.LineIndex(text)
    assert index.position_at(len(text)).line == 3  # four lines: \u2028 and the form feed break none
    assert [index.line_text(i) for i in range(4)] == ["a", "b", "c", "d\u2028e\x0cf"]
    # the end of a CRLF line is before its \r; an offset between \r and \n maps there too
    assert index.position_at(1) == types.Position(line=0, character=1)
    assert index.position_at(2) == types.Position(line=0, character=1)
    assert index.position_at(3) == types.Position(line=1, character=0)


def test_clamping():
    index = positions.LineIndex("ab\ncd")
    assert index.offset_at(types.Position(line=0, character=99)) == 2
    assert index.offset_at(types.Position(line=9, character=0)) == 5
    assert index.position_at(99) == types.Position(line=1, character=2)
    empty = positions.LineIndex("")
    assert empty.offset_at(types.Position(line=0, character=0)) == 0
    assert empty.position_at(0) == types.Position(line=0, character=0)


def test_negotiate():
    caps = types.ClientCapabilities()
    assert positions.negotiate(caps) == "utf-16"
    caps = types.ClientCapabilities(general=types.GeneralClientCapabilities(
        position_encodings=[types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf16]))
    assert positions.negotiate(caps) == "utf-8"
    caps = types.ClientCapabilities(general=types.GeneralClientCapabilities(position_encodings=["utf-7", "utf-32"]))
    assert positions.negotiate(caps) == "utf-32"
    assert positions.negotiate(None) == "utf-16"


texts = st.text(alphabet=st.sampled_from(list("ab \t\n\r") + [EMOJI, "\u4e2d", "\u0301", "\u2028"]), max_size=40)


@given(texts, st.data())
@settings(max_examples=300, deadline=None)
def test_position_roundtrip(text, data):
    index = positions.LineIndex(text)
    offset = data.draw(st.integers(0, len(text)))
    for enc in ("utf-16", "utf-8", "utf-32"):
        pos = index.position_at(offset, enc)
        back = index.offset_at(pos, enc)
        # the only offsets that do not round-trip are those between the \r and \n of a CRLF
        if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
            assert back == offset - 1
        else:
            assert back == offset


# --- edits ------------------------------------------------------------------------------------

def apply_lsp_edit(text: str, edit: types.TextEdit, encoding: str) -> str:
    """An independent client-side application of one TextEdit (what an editor does)."""
    lines = re.split(r"(?<=\r\n)|(?<=\n)|(?<=\r)(?!\n)", text)

    def offset(pos: types.Position) -> int:
        if pos.line >= len(lines):
            return len(text)
        start = sum(len(line) for line in lines[:pos.line])
        content = lines[pos.line].rstrip("\r\n")
        if encoding == "utf-16":
            units = content.encode("utf-16-le")[: 2 * pos.character]
            return start + len(units.decode("utf-16-le", "ignore"))
        if encoding == "utf-8":
            return start + len(content.encode("utf-8")[: pos.character].decode("utf-8", "ignore"))
        return start + min(pos.character, len(content))

    a, b = offset(edit.range.start), offset(edit.range.end)
    return text[:a] + edit.new_text + text[b:]


@given(texts, texts)
@settings(max_examples=400, deadline=None)
def test_minimal_replacement_is_exact_and_minimal(old, new):
    rep = edits.minimal_replacement(old, new)
    if old == new:
        assert rep is None
        return
    assert rep.apply(old) == new
    kept = len(old) - (rep.end - rep.start)
    assert kept <= len(old)
    # never cut a CRLF in two, in either text
    for text, cut in ((old, rep.start), (old, rep.end), (new, rep.start), (new, rep.start + len(rep.new_text))):
        assert not (0 < cut < len(text) and text[cut - 1] == "\r" and text[cut] == "\n")
    for enc in ("utf-16", "utf-8", "utf-32"):
        assert apply_lsp_edit(old, edits.text_edit(old, rep, enc), enc) == new


def test_minimal_replacement_examples():
    assert edits.minimal_replacement("return a - b\n", "return a + b\n") == edits.Replacement(9, 10, "+")
    assert edits.minimal_replacement("x\r\n", "x\r\ny\r\n") == edits.Replacement(3, 3, "y\r\n")
    rep = edits.minimal_replacement("a\r\n", "a\n")
    assert rep.apply("a\r\n") == "a\n" and rep.start == 1


@given(st.lists(st.sampled_from(["a\n", "b\n", "\tc\n", f"{EMOJI}\n", "d\r\n"]), max_size=6),
       st.lists(st.sampled_from(["a\n", "x\n", "\tc\n", f"{CJK}\n", "z"]), max_size=6), st.booleans(), st.data())
@settings(max_examples=200, deadline=None)
def test_live_region_walks_from_input_to_output(inp, out, at_end, data):
    before, after = "head\n", ("" if at_end else "tail\n")
    if at_end and inp:
        inp = [*inp[:-1], inp[-1].rstrip("\n")]  # the region is the end of a file without final newline
    region_in = "".join(inp)
    doc = before + region_in + after
    n_before = len(split_lines(before))
    lines = (n_before + 1, n_before + len(split_lines(region_in))) if region_in else None
    if lines is None:
        doc, before, after = region_in, "", ""
    live = edits.LiveRegion(doc, lines)
    assert live.input == region_in
    shown_doc = doc
    resolved = ""
    consumed = 0
    for line in out:
        resolved += line
        consumed = min(len(live.input_lines), data.draw(st.integers(consumed, len(live.input_lines))))
        new = live.live_text(resolved, consumed)
        rep = live.step(new)
        if rep is not None:
            shown_doc = apply_lsp_edit(shown_doc, edits.text_edit(shown_doc, rep, "utf-16"), "utf-16")
        live.commit(new)
        assert shown_doc == live.document()
    final = live.final_text("".join(out))
    rep = live.step(final)
    if rep is not None:
        shown_doc = rep.apply(shown_doc)
    assert shown_doc == before + final + after


def test_crlf_documents_get_crlf_output():
    doc = "a\r\nb\r\n"
    live = edits.LiveRegion(doc, None)
    assert live.crlf
    assert live.final_text("a\nc\n") == "a\r\nc\r\n"
    assert live.live_text("x\n", 1) == "x\r\nb\r\n"
    assert not edits.LiveRegion("a\r\nb\n", None).crlf


def test_workspace_edit_shapes():
    edit = types.TextEdit(range=types.Range(start=types.Position(line=0, character=0),
                                            end=types.Position(line=0, character=1)), new_text="x")
    versioned = edits.workspace_edit("file:///a.py", 7, edit, document_changes=True)
    assert versioned.document_changes[0].text_document.version == 7
    plain = edits.workspace_edit("file:///a.py", 7, edit, document_changes=False)
    assert plain.changes == {"file:///a.py": [edit]}


# --- actions: instruction and region rule -----------------------------------------------------

def diag(message: str, line: int = 0) -> types.Diagnostic:
    return types.Diagnostic(range=types.Range(start=types.Position(line=line, character=0),
                                              end=types.Position(line=line, character=3)), message=message)


def test_fix_instruction():
    assert actions.fix_instruction([]) == "Fix the bug"
    assert actions.fix_instruction([diag("undefined name 'x'"), diag("unused  import\nos"),
                                    diag("undefined name 'x'")]) == "Fix: undefined name 'x'; unused import os"


def test_region_rule():
    small = "".join(f"line {i}\n" for i in range(10))
    assert actions.region_lines(small, None) is None
    assert actions.region_lines(small, (0, 0)) is None  # cursor, small file: whole document
    start = small.index("line 2")
    assert actions.region_lines(small, (start + 2, small.index("line 4") + 1)) == (3, 5)
    # a selection that ends at column 0 does not take that line
    assert actions.region_lines(small, (start, small.index("line 4"))) == (3, 4)
    big = "".join(f"def f{i}():\n    x = {i}\n    return x\n\n" for i in range(80))
    cursor = big.index("    x = 40")
    assert actions.region_lines(big, (cursor, cursor), whole_document_lines=200) == (161, 163)
    assert actions.region_lines(big, (cursor, cursor), whole_document_lines=1000) is None
    assert actions.region_lines("", (0, 0)) is None


def test_code_actions_and_only_filter():
    text = "def f():\n    return x\n"
    rng = types.Range(start=types.Position(line=1, character=4), end=types.Position(line=1, character=4))
    params = types.CodeActionParams(text_document=types.TextDocumentIdentifier(uri="file:///t.py"), range=rng,
                                    context=types.CodeActionContext(diagnostics=[diag("undefined name 'x'", 1)]))
    found = actions.code_actions("file:///t.py", text, params)
    assert [a.title for a in found] == ["AI fix", "AI edit\u2026"]
    fix, edit = found
    assert fix.kind == types.CodeActionKind.QuickFix and fix.diagnostics
    assert fix.command.command == "copyAsDecode.server.edit"
    assert fix.command.arguments[0]["instruction"] == "Fix: undefined name 'x'"
    assert fix.command.arguments[0]["kind"] == "fix"
    # the diagnostic's line is the focus, and it is kept as the hint (a cursor gets the engine's default)
    assert fix.command.arguments[0]["focus"] == {"line": 1, "character": 0, "source": "diagnostic"}
    assert actions.EditArgs.parse(fix.command.arguments).focus_policy == "keep"
    params.context.diagnostics = []
    cursor_fix = actions.code_actions("file:///t.py", text, params)[0]
    assert cursor_fix.command.arguments[0]["focus"] == {"line": 1, "character": 4, "source": "cursor"}
    assert actions.EditArgs.parse(cursor_fix.command.arguments).focus_policy is None
    params.context.diagnostics = [diag("undefined name 'x'", 1)]
    assert edit.kind == types.CodeActionKind.RefactorRewrite
    assert edit.command.arguments[0]["instruction"] is None and edit.command.arguments[0]["kind"] == "edit"
    params.context.only = [types.CodeActionKind.QuickFix]
    assert [a.title for a in actions.code_actions("file:///t.py", text, params)] == ["AI fix"]
    params.context.only = [types.CodeActionKind.Refactor]
    assert [a.title for a in actions.code_actions("file:///t.py", text, params)] == ["AI edit\u2026"]


def test_edit_args_contract():
    args = actions.EditArgs.parse([{"uri": "file:///a.py", "range": None, "instruction": None, "kind": "fix"}])
    assert args.instruction == "Fix the bug" and args.range is None
    with pytest.raises(ValueError, match="uri"):
        actions.EditArgs.parse({"range": None})
    with pytest.raises(ValueError, match="kind"):
        actions.EditArgs.parse({"uri": "file:///a.py", "kind": "rewrite"})
    with pytest.raises(ValueError, match="focus.source"):
        actions.EditArgs.parse({"uri": "file:///a.py", "focus": {"line": 1, "source": "oracle"}})
    plain = actions.EditArgs.parse({"uri": "file:///a.py", "focus": {"line": 1}})  # older clients: a cursor
    assert (plain.focus_source, plain.focus_policy) == ("cursor", None)


def test_uri_argument_of_the_commands():
    """The ``{"uri": str | null}`` argument of cancel, applyPending and settings (and the edit's uri)."""
    uri = "file:///a.py"
    assert actions.uri_argument([{"uri": uri}], "cmd") == uri and actions.uri_argument({"uri": uri}, "cmd") == uri
    for absent in ([], [{}], [{"uri": None}], {"uri": None}):
        assert actions.uri_argument(absent, "cmd") is None
    with pytest.raises(ValueError, match=r'cmd takes one argument object \{"uri": str \| null\}, got \'file'):
        actions.uri_argument([uri], "cmd")  # a bare string is not the argument object
    with pytest.raises(ValueError, match="'uri' must be the document's URI or null, got 5"):
        actions.uri_argument([{"uri": 5}], "cmd")
    with pytest.raises(ValueError, match="'uri' must be the document's URI, got None"):
        actions.uri_argument([{"uri": None}], "cmd", required=True)
    with pytest.raises(ValueError, match="takes one argument object"):
        actions.uri_argument([{"uri": uri}, {"uri": uri}], "cmd")


def test_apply_update_arguments():
    """``copyAsDecode.server.applyUpdate``: the update as it was sent (whitespace kept), kind
    ``apply``, the whole document, the mode asked for over the setting's; a missing update, a
    non-string instruction, a non-boolean ``partial`` or a mode no apply runs is refused with the
    expected shape."""
    update = "def f():\n    # ... existing code ...\n    return 2\n"
    args = actions.EditArgs.parse_apply([{"uri": "file:///a.py", "update": update}])
    assert (args.kind, args.update, args.range, args.instruction, args.partial) == ("apply", update, None, None, False)
    named = actions.EditArgs.parse_apply({"uri": "file:///a.py", "update": update, "instruction": " Fix f ",
                                          "partial": True})
    assert (named.instruction, named.partial, named.mode) == ("Fix f", True, None)
    asked = actions.EditArgs.parse_apply({"uri": "file:///a.py", "update": update, "mode": "aligner"})
    settings = Settings(mode="program")
    assert asked.mode == "aligner" and asked.over(settings).edit.mode == "aligner"
    assert named.over(settings) is settings  # no mode asked: the setting's
    with pytest.raises(ValueError, match="'mode' must be one of auto, program, speculative, ar, aligner or null"):
        actions.EditArgs.parse_apply({"uri": "file:///a.py", "update": update, "mode": "pld"})
    with pytest.raises(ValueError, match=r"'update' must be the text to apply, got None; expected \{"):
        actions.EditArgs.parse_apply({"uri": "file:///a.py"})
    with pytest.raises(ValueError, match="'instruction' must be a string or null"):
        actions.EditArgs.parse_apply({"uri": "file:///a.py", "update": update, "instruction": 3})
    with pytest.raises(ValueError, match="'partial' must be true, false or null"):
        actions.EditArgs.parse_apply({"uri": "file:///a.py", "update": update, "partial": "yes"})
    with pytest.raises(ValueError, match="'uri' must be the document's URI"):
        actions.EditArgs.parse_apply({"update": update})


def test_path_of_a_uri():
    from lsp_server.documents import path_of

    assert path_of(Path("/tmp/a b/\u00e9.py").as_uri()) == Path("/tmp/a b/\u00e9.py")
    assert path_of("file:///tmp/a%20b/x.py") == Path("/tmp/a b/x.py")
    assert path_of("untitled:Untitled-1") is None and path_of("") is None


def test_client_capabilities_through_pygls():
    from lsp_server.client import ClientFeatures, PyglsClient
    from lsp_server.server import create_server

    server = create_server()
    server.protocol.client_capabilities = types.ClientCapabilities(window=types.WindowClientCapabilities())
    features = PyglsClient(server).features
    assert not features.work_done_progress and not features.review
    server.protocol.client_capabilities = types.ClientCapabilities(
        window=types.WindowClientCapabilities(work_done_progress=True),
        workspace=types.WorkspaceClientCapabilities(workspace_edit=types.WorkspaceEditClientCapabilities(
            document_changes=True, change_annotation_support=types.ChangeAnnotationsSupportOptions())))
    features = PyglsClient(server).features
    assert features.work_done_progress and features.review and features.document_changes
    assert not features.configuration and not features.configuration_registration
    # an annotated edit needs documentChanges too
    assert not ClientFeatures.of(types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(
        workspace_edit=types.WorkspaceEditClientCapabilities(
            change_annotation_support=types.ChangeAnnotationsSupportOptions())))).review
    assert ClientFeatures.of(None) == ClientFeatures()


def test_which_clients_create_files():
    """A client creates files when it lists "create" among its resource operations (Neovim lists
    it without documentChanges); Neovim before 0.8 makes no folder for a new file."""
    from pytest_lsp import client_capabilities

    from lsp_server.client import ClientFeatures

    vscode = ClientFeatures.of(client_capabilities("visual-studio-code"))
    assert vscode.create_files and vscode.creates_folders
    for version, folders in (("0.7.2", False), ("0.8.0", True), ("0.11.0", True), ("v0.7.0", False), ("nightly", True)):
        neovim = ClientFeatures.of(client_capabilities("neovim@v0.7"), types.ClientInfo(name="Neovim", version=version))
        assert neovim.create_files and not neovim.document_changes and neovim.creates_folders == folders, version
    renames_only = types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(
        workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True, resource_operations=[
            types.ResourceOperationKind.Rename])))
    assert not ClientFeatures.of(renames_only).create_files
    assert not ClientFeatures.of(client_capabilities("emacs")).create_files


def test_document_language_maps_editor_ids_to_the_engines_fence_names():
    from engine.core.languages import LANGUAGE_BY_SUFFIX
    from lsp_server.request import EDITOR_LANGUAGES, document_language

    assert set(EDITOR_LANGUAGES.values()) <= set(LANGUAGE_BY_SUFFIX.values())  # names the CLI sends too
    assert document_language("file:///a/b.py", "python") == "python"
    assert document_language("file:///a/App.jsx", "javascriptreact") == "jsx"
    assert document_language("file:///a/x.mjs", "javascript") == "javascript"  # a suffix the CLI does not know
    assert document_language("untitled:Untitled-1", "python") == "python"  # no suffix at all
    assert document_language("file:///a/b.py", "plaintext") == "python"  # an id the engine has no name for
    assert document_language("file:///a/b%20c.RS", "") == "rust"  # the suffix, decoded, any case
    assert document_language("file:///a/notes.txt", "plaintext") == ""


# --- settings ---------------------------------------------------------------------------------

def test_settings_validation_and_unknown_keys():
    layer = config.parse_layer({"mode": "ar", "max-new-tokens": 64, "ContextLines": 3, "colour": "red",
                                "applyMode": "sometimes", "trustRemoteCode": True}, "test")
    assert layer.values == {"mode": "ar", "max_new_tokens": 64, "context_lines": 3}
    joined = "\n".join(layer.warnings)
    assert "test: unknown setting 'colour' ignored" in joined
    assert "test: applyMode 'sometimes' is not valid; choose one of stream, final, preview; ignored" in joined
    assert "test: trustRemoteCode is only read from user-level settings" in joined
    with pytest.raises(config.ConfigError, match="mode 'fast' is not valid; choose one of auto, program"):
        config.check_value("mode", "fast")


def test_precedence_and_model_sources(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.copy-as-decode]\nmode = "speculative"\ncontext_lines = 7\n')
    sub = tmp_path / "pkg"
    sub.mkdir()
    (sub / ".copy-as-decode.toml").write_text('mode = "ar"\nmodel = "/somewhere/else.gguf"\n'
                                              'trust_remote_code = true\n')
    ws = WorkspaceConfig([tmp_path])
    ws.set_user({"copyAsDecode": {"maxNewTokens": 99}})
    settings, warnings = ws.settings_for(sub / "m.py")
    assert (settings.edit.mode, settings.edit.context_lines, settings.edit.max_new_tokens) == ("ar", 7, 99)
    assert settings.model.name == "default" and not settings.model.trust_remote_code
    assert any("not in your allowedModels" in w for w in warnings)
    ws.set_pushed({"copyAsDecode": {"mode": "program"}})
    assert ws.settings_for(sub / "m.py")[0].edit.mode == "program"
    ws.set_pulled("file:///x", {"mode": "speculative"})
    assert ws.settings_for(sub / "m.py", "file:///x")[0].edit.mode == "speculative"
    ws.set_user({"allowedModels": ["default", f"{tmp_path}/*"], "trustRemoteCode": True})
    (sub / ".copy-as-decode.toml").write_text(f'model = "{tmp_path}/models/x.gguf"\n')
    ws.files.reload(sub / ".copy-as-decode.toml")
    settings, _ = ws.settings_for(sub / "m.py")
    assert settings.model.name == f"{tmp_path}/models/x.gguf" and settings.model.trust_remote_code


def test_selector_setting_follows_the_model_rule(tmp_path: Path):
    """A selector is an adapter folder (weights): workspace-level sources may name one only under
    a path pattern of the user's allowedModels; auto / none are always fine."""
    adapters = tmp_path / "adapters" / "mine"
    (tmp_path / ".copy-as-decode.toml").write_text(f'selector = "{adapters}"\napply_mode = "preview"\n')
    ws = WorkspaceConfig([tmp_path])
    settings, warnings = ws.settings_for(tmp_path / "m.py")
    assert settings.model.selector == "auto" and settings.editor.apply_mode == "preview"
    assert any("selector" in w and "allowedModels" in w for w in warnings)
    ws.set_user({"allowedModels": ["default", "hub:*", f"{tmp_path}/adapters/*"]})
    settings, warnings = ws.settings_for(tmp_path / "m.py")
    assert settings.model.selector == str(adapters) and not warnings
    ws.set_pushed({"copyAsDecode": {"selector": "none"}})
    assert ws.settings_for(tmp_path / "m.py")[0].model.selector == "none"
    assert ws.settings_for(tmp_path / "m.py")[0].lsp_dict()["selector"] == "none"
    assert config.selector_allowed("auto", []) and not config.selector_allowed("/x/y", ["default", "hub:*"])


def test_model_key_separates_selectors():
    from lsp_server.models import ModelKey

    a = ModelKey.of(config.Settings())
    b = ModelKey.of(config.Settings(selector="none"))
    assert a != b and a.selector == "auto" and "selector none" in b.describe() and "selector" not in a.describe()


def test_config_files_cascade(tmp_path: Path):
    (tmp_path / ".copy-as-decode.toml").write_text('mode = "ar"\nmax_new_tokens = 10\n')
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / ".copy-as-decode.toml").write_text('max_new_tokens = 20\n')
    (tmp_path / "a" / "b" / ".copy-as-decode.toml").write_text('context_lines = 2\n')
    ws = WorkspaceConfig([tmp_path])
    settings, _ = ws.settings_for(tmp_path / "a" / "b" / "x.py")
    assert (settings.edit.mode, settings.edit.max_new_tokens, settings.edit.context_lines) == ("ar", 20, 2)
    assert [p.parent.name for p in ws.config_files(tmp_path / "a" / "x.py")] == [tmp_path.name, "a"]
    # the headless CLI reads the same files
    cli_settings, _ = config.load_workspace_settings(tmp_path / "a" / "b" / "x.py")
    assert cli_settings.edit.max_new_tokens == 20


def test_invalid_toml_keeps_last_good(tmp_path: Path):
    path = tmp_path / ".copy-as-decode.toml"
    path.write_text('mode = "ar"\n')
    files = FileLayers()
    assert files.get(path)[0].values["mode"] == "ar"
    path.write_text('mode = "ar\n')
    layer, error = files.reload(path)
    assert layer.values["mode"] == "ar" and "invalid TOML" in error and "last good" in error
    assert files.get(path)[1] == error  # still what the settings command reports
    path.write_text('context_lines = 4\nmode = 3\n')  # a bad value skips its key, not the file
    layer, error = files.reload(path)
    assert error is None and layer.values == {"context_lines": 4}
    assert layer.warnings == [f"{path}:2: mode must be a string, got 3; ignored"]


def test_model_allowed():
    assert config.model_allowed("default", ["default"])
    assert config.model_allowed("Qwen/Qwen2.5-Coder-1.5B-Instruct", ["hub:Qwen/*"])
    assert not config.model_allowed("evil/model", ["hub:Qwen/*"])
    assert not config.model_allowed("/tmp/m.gguf", ["default", "hub:*"])
    assert config.model_allowed("/tmp/m.gguf", ["/tmp/*"])


# --- model pool and queue ---------------------------------------------------------------------

async def test_model_pool_shares_loads_and_bounds_memory():
    loads = []

    def loader(key, progress):
        loads.append(key.model)
        progress(f"loading {key.model}")
        if key.model == "broken":
            raise RuntimeError("model 'broken': cannot load")
        return object()

    pool = ModelPool(capacity=2, loader=loader)
    key = lambda m: ModelKey(m, "auto", "auto", False)  # noqa: E731
    a1, a2 = await asyncio.gather(pool.get(key("a")), pool.get(key("a")))
    assert a1 is a2 and loads == ["a"]
    await pool.get(key("b"))
    await pool.get(key("c"))
    assert not pool.loaded(key("a")) and pool.loaded(key("c"))
    with pytest.raises(RuntimeError, match="cannot load"):
        await pool.get(key("broken"))
    with pytest.raises(RuntimeError):
        await pool.get(key("broken"))
    assert loads.count("broken") == 2  # failures are not cached


async def test_edit_queue_newer_request_cancels_older():
    queue = EditQueue()
    cancelled = []
    queue.claim("file:///a", "t1", cancelled.append)
    queue.claim("file:///b", "t2", cancelled.append)
    queue.claim("file:///a", "t3", cancelled.append)
    assert cancelled == ["superseded"]
    assert queue.cancel_all("file:///b") == 1 and cancelled[-1] == "cancelled"
    queue.release("file:///a", "t1")  # the superseded request ends: the newer one stays the document's
    assert queue.cancel_all("file:///a") == 1 and cancelled[-1] == "cancelled"


def test_backend_settings_reach_the_backend_options(tmp_path: Path):
    """gpuLayers and prefixCacheTokens are workspace settings that end in the engine's
    BackendOptions (the model key, so a change loads the model again); the default prompt cache
    is the engine's own default, and out-of-range values are refused with the key named."""
    from engine.runtime.prefix_cache import PrefixStore

    assert config.Settings().backend.prefix_cache_tokens == PrefixStore().max_tokens
    (tmp_path / ".copy-as-decode.toml").write_text("gpu_layers = -1\nprefix_cache_tokens = 0\n")
    settings, warnings = WorkspaceConfig([tmp_path]).settings_for(tmp_path / "m.py")
    assert not warnings
    assert (settings.backend.gpu_layers, settings.backend.prefix_cache_tokens) == (-1, 0)
    with pytest.raises(config.ConfigError, match="gpuLayers must be between -1 and 4096"):
        config.check_value("gpu_layers", -2)


def test_the_next_candidate_action_and_its_turn():
    """"AI fix: next candidate (k of n)" is a quickfix that names the document; the turn goes
    round the offers and back to the first; one offer alone has no next."""
    from engine.candidates import CheckSpec
    from lsp_server.actions import COMMAND_NEXT_CANDIDATE, next_candidate_action
    from lsp_server.alternatives import Alternatives, Offer

    cursor = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0))
    params = types.CodeActionParams(text_document=types.TextDocumentIdentifier(uri="file:///a.py"), range=cursor,
                                    context=types.CodeActionContext(diagnostics=[]))
    action = next_candidate_action("file:///a.py", 2, 3, params)
    assert action is not None and action.title == "AI fix: next candidate (2 of 3)"
    assert action.kind == types.CodeActionKind.QuickFix and action.command is not None
    assert (action.command.command, action.command.arguments) == (COMMAND_NEXT_CANDIDATE, [{"uri": "file:///a.py"}])
    params.context.only = [types.CodeActionKind.RefactorRewrite]
    assert next_candidate_action("file:///a.py", 2, 3, params) is None
    offers = [Offer(f"x = {i}\n", None) for i in range(3)]
    turn = Alternatives("file:///a.py", offers, "x = 0\n", CheckSpec("true"), Path("/tmp/a.py"))
    seen = []
    for _ in range(3):
        following = turn.following()
        assert following is not None
        seen.append(following)
        turn.shown = following
    assert seen == [1, 2, 0]
    assert Alternatives("file:///a.py", offers[:1], "x = 0\n", CheckSpec("true"), Path("/tmp/a.py")).following() is None
