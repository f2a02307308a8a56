import assert from "node:assert/strict";
import { test } from "node:test";

import {
  APPLY_MODES,
  buildApplyArguments,
  buildEditArguments,
  buildServerLaunch,
  classifyProbe,
  crashPolicy,
  expandPath,
  explicitSettings,
  fixFocus,
  fixInstruction,
  InspectedValue,
  instructionItems,
  launchProblemMessage,
  MAX_RECENT_INSTRUCTIONS,
  needsInstruction,
  PROBE_PACKAGE_MISSING,
  PROBE_PYTHON_TOO_OLD,
  PROBE_SCRIPT,
  pythonFromExtensionApi,
  rememberInstruction,
  resolvePython,
  RESTART_SETTINGS,
  SELECTOR_CHOICES,
  SERVER_APPLY_COMMAND,
  SERVER_EDIT_COMMAND,
  SERVER_KEYS,
  serverExitMessage,
  tailOf,
  USER_ONLY_KEYS,
  userLevelSettings,
} from "../src/settings";

test("the palette command ids differ from the server's command id", () => {
  // vscode-languageclient registers the server's command ids itself; a clash fails activation.
  const pkg = require("../../../package.json");
  const ids: string[] = pkg.contributes.commands.map((c: { command: string }) => c.command);
  assert.deepEqual(ids.sort(), [
    "copyAsDecode.aiEdit",
    "copyAsDecode.aiFix",
    "copyAsDecode.applyClipboard",
    "copyAsDecode.restartServer",
    "copyAsDecode.showLog",
  ]);
  assert.ok(!ids.includes(SERVER_EDIT_COMMAND) && !ids.includes(SERVER_APPLY_COMMAND));
});

test("settings mirror the server's, with resource scope", () => {
  const props = require("../../../package.json").contributes.configuration.properties;
  for (const key of SERVER_KEYS) {
    assert.equal(props[`copyAsDecode.${key}`].scope, "resource", key);
  }
  assert.equal(props["copyAsDecode.model"].default, "default");
  assert.equal(props["copyAsDecode.mode"].default, "auto");
  assert.deepEqual(props["copyAsDecode.device"].enum, ["auto", "cpu", "cuda"]);
  assert.deepEqual(props["copyAsDecode.dtype"].enum, ["auto", "float32", "bfloat16", "float16"]);
  assert.deepEqual(props["copyAsDecode.mode"].enum, ["auto", "program", "speculative", "ar"]);
  assert.deepEqual(props["copyAsDecode.applyMode"].enum, [...APPLY_MODES]);
  assert.deepEqual(props["copyAsDecode.applyMode"].enum, ["stream", "final", "preview"]);
  assert.equal(props["copyAsDecode.applyMode"].enumDescriptions.length, APPLY_MODES.length);
  assert.equal(props["copyAsDecode.applyMode"].default, "stream");
  // selector: auto | none | a folder, so a free string (an enum would refuse folders).
  assert.equal(props["copyAsDecode.selector"].type, "string");
  assert.equal(props["copyAsDecode.selector"].enum, undefined);
  assert.equal(props["copyAsDecode.selector"].default, SELECTOR_CHOICES[0]);
  for (const choice of SELECTOR_CHOICES) {
    assert.match(props["copyAsDecode.selector"].markdownDescription, new RegExp("`" + choice + "`"));
  }
  assert.match(props["copyAsDecode.selector"].markdownDescription, /allowedModels/);
  assert.equal(props["copyAsDecode.maxNewTokens"].default, 1024);
  assert.equal(props["copyAsDecode.contextLines"].default, 20);
  assert.equal(props["copyAsDecode.pythonPath"].scope, "machine-overridable");
});

test("resolvePython: the setting wins, then the Python extension, then python3", () => {
  assert.deepEqual(resolvePython({ configured: "/opt/venv/bin/python", pythonExtension: ["/usr/bin/python3.12"] }), {
    command: "/opt/venv/bin/python",
    args: [],
    source: "setting",
  });
  assert.deepEqual(resolvePython({ configured: "  ", pythonExtension: ["conda", "run", "-n", "x", "python"] }), {
    command: "conda",
    args: ["run", "-n", "x", "python"],
    source: "python-extension",
  });
  assert.deepEqual(resolvePython({ configured: undefined, pythonExtension: undefined, platform: "linux" }), {
    command: "python3",
    args: [],
    source: "default",
  });
  assert.equal(resolvePython({ configured: "", pythonExtension: [], platform: "win32" }).command, "python");
});

test("resolvePython expands ${workspaceFolder} and ~", () => {
  const r = resolvePython({
    configured: "${workspaceFolder}/.venv/bin/python",
    pythonExtension: undefined,
    workspaceFolder: "/ws",
  });
  assert.equal(r.command, "/ws/.venv/bin/python");
  assert.equal(expandPath("~/venv/bin/python", undefined, "/home/u"), "/home/u/venv/bin/python");
  assert.equal(expandPath("${userHome}/py", undefined, "/home/u"), "/home/u/py");
});

test("pythonFromExtensionApi reads either API shape and tolerates junk", () => {
  assert.deepEqual(
    pythonFromExtensionApi({ settings: { getExecutionDetails: () => ({ execCommand: ["/e/python"] }) } }),
    ["/e/python"],
  );
  assert.deepEqual(
    pythonFromExtensionApi({ environments: { getActiveEnvironmentPath: () => ({ path: "/p/python" }) } }),
    ["/p/python"],
  );
  assert.deepEqual(
    pythonFromExtensionApi({
      settings: { getExecutionDetails: () => ({ execCommand: undefined }) },
      environments: { getActiveEnvironmentPath: () => ({ path: "/p/python" }) },
    }),
    ["/p/python"],
  );
  assert.equal(pythonFromExtensionApi(undefined), undefined);
  assert.equal(pythonFromExtensionApi({ settings: { getExecutionDetails: () => { throw new Error("x"); } } }), undefined);
});

test("buildServerLaunch runs the module unbuffered with extra args", () => {
  const launch = buildServerLaunch(
    { command: "conda", args: ["run", "-n", "x", "python"], source: "python-extension" },
    ["--log-level", "debug", 7],
    { PATH: "/bin" },
    "/ws",
  );
  assert.equal(launch.command, "conda");
  assert.deepEqual(launch.args, ["run", "-n", "x", "python", "-m", "lsp_server", "--log-level", "debug"]);
  assert.deepEqual(launch.options, { env: { PATH: "/bin", PYTHONUNBUFFERED: "1" }, cwd: "/ws" });
  assert.deepEqual(buildServerLaunch({ command: "python3", args: [], source: "default" }, undefined, {}).args, [
    "-m",
    "lsp_server",
  ]);
});

test("buildEditArguments passes the selection, also an empty one (the cursor)", () => {
  const caret = { start: { line: 3, character: 2 }, end: { line: 3, character: 2 } };
  assert.deepEqual(buildEditArguments("file:///a.py", caret, null, "fix", caret.start), {
    uri: "file:///a.py",
    range: caret,
    instruction: null,
    kind: "fix",
    focus: { line: 3, character: 2 },
  });
  const sel = { start: { line: 1, character: 0 }, end: { line: 4, character: 0 } };
  assert.deepEqual(buildEditArguments("file:///a.py", sel, " Add type hints ", "edit"), {
    uri: "file:///a.py",
    range: sel,
    instruction: "Add type hints",
    kind: "edit",
    focus: null,
  });
  assert.equal(buildEditArguments("untitled:Untitled-1", null, "  ", "fix").instruction, null);
});

test("buildApplyArguments sends the clipboard as it is, and nothing for an empty one", () => {
  const update = "def add(a, b):\n    return a + b\n";
  assert.deepEqual(buildApplyArguments("file:///a.py", update), { uri: "file:///a.py", update, instruction: null });
  assert.equal(buildApplyArguments("file:///a.py", update, " Fix add ")?.instruction, "Fix add");
  assert.equal(buildApplyArguments("file:///a.py", " \n\t"), undefined);
});

test("fixFocus: the first diagnostic's start, else the cursor or a one-line selection, else none", () => {
  const caret = { start: { line: 3, character: 2 }, end: { line: 3, character: 2 } };
  const inLine = { start: { line: 5, character: 1 }, end: { line: 5, character: 9 } };
  const lines = { start: { line: 1, character: 0 }, end: { line: 4, character: 0 } };
  const diag = (line: number, character: number, message = "x") => ({
    range: { start: { line, character }, end: { line, character: character + 3 } },
    message,
  });
  assert.deepEqual(fixFocus(caret, []), { line: 3, character: 2 });
  assert.deepEqual(fixFocus(inLine, []), { line: 5, character: 1 });
  assert.equal(fixFocus(lines, []), null);
  assert.deepEqual(fixFocus(lines, [diag(2, 4), diag(1, 0)]), { line: 2, character: 4 });
  const d = diag(7, 1);
  const focus = fixFocus(caret, [d]);
  assert.deepEqual(focus, { line: 7, character: 1 });
  assert.notEqual(focus, d.range.start, "a copy, not the diagnostic's own object");
});

test("fixInstruction: 'Fix: ' and the diagnostics' messages, whitespace collapsed, no duplicates", () => {
  const at = { start: { line: 0, character: 0 }, end: { line: 0, character: 1 } };
  assert.equal(fixInstruction([]), null);
  assert.equal(
    fixInstruction([
      { range: at, message: "Undefined name\n  `x`" },
      { range: at, message: "Undefined name `x`" },
      { range: at, message: "  " },
      { range: at, message: "unused import" },
    ]),
    "Fix: Undefined name `x`; unused import",
  );
});

test("explicitSettings: only server keys the user set, most specific scope first", () => {
  const inspected: Record<string, InspectedValue> = {
    model: { globalValue: "Qwen/Qwen2.5-Coder-1.5B-Instruct", workspaceFolderValue: "default" },
    device: { globalValue: "cuda" },
    mode: { workspaceValue: "speculative", globalValue: "ar" },
    maxNewTokens: {},
    pythonPath: { globalValue: "/usr/bin/python3" },
    trustRemoteCode: { globalValue: true },
  };
  assert.deepEqual(explicitSettings((k) => inspected[k]), { model: "default", device: "cuda", mode: "speculative" });
  assert.deepEqual(explicitSettings(() => undefined), {});
});

test("explicitSettings forwards applyMode and selector (the server checks a selector folder)", () => {
  const inspected: Record<string, InspectedValue> = {
    applyMode: { globalValue: "stream", workspaceFolderValue: "preview" },
    selector: { workspaceValue: "./adapters/mine" },
  };
  assert.deepEqual(explicitSettings((k) => inspected[k]), { applyMode: "preview", selector: "./adapters/mine" });
  // Only the user's own value goes into initializationOptions (the level whose allowedModels counts).
  assert.deepEqual(userLevelSettings((k) => inspected[k]), { applyMode: "stream" });
});

test("userLevelSettings: global values, including the user-only keys", () => {
  const inspected: Record<string, InspectedValue> = {
    model: { globalValue: "Qwen/Qwen2.5-Coder-1.5B-Instruct", workspaceFolderValue: "default" },
    mode: { workspaceValue: "speculative" },
    trustRemoteCode: { globalValue: true },
    allowedModels: { globalValue: ["default", "hub:Qwen/*"] },
    pythonPath: { globalValue: "/usr/bin/python3" },
  };
  assert.deepEqual(userLevelSettings((k) => inspected[k]), {
    model: "Qwen/Qwen2.5-Coder-1.5B-Instruct",
    trustRemoteCode: true,
    allowedModels: ["default", "hub:Qwen/*"],
  });
});

test("every server key and user-only key is contributed; restart-only keys are listed", () => {
  const props = require("../../../package.json").contributes.configuration.properties;
  for (const key of [...SERVER_KEYS, ...USER_ONLY_KEYS]) {
    assert.ok(props[`copyAsDecode.${key}`], key);
  }
  for (const key of USER_ONLY_KEYS) {
    assert.equal(props[`copyAsDecode.${key}`].scope, "application", key);
    assert.ok(RESTART_SETTINGS.includes(`copyAsDecode.${key}`));
  }
  assert.ok(RESTART_SETTINGS.includes("copyAsDecode.pythonPath"));
});

test("needsInstruction: only 'edit' commands without an instruction", () => {
  assert.equal(needsInstruction({ uri: "u", range: null, instruction: null, kind: "edit" }), true);
  assert.equal(needsInstruction({ uri: "u", range: null, instruction: "", kind: "edit" }), true);
  assert.equal(needsInstruction({ uri: "u", range: null, instruction: "x", kind: "edit" }), false);
  assert.equal(needsInstruction({ uri: "u", range: null, instruction: null, kind: "fix" }), false);
  assert.equal(needsInstruction(undefined), false);
});

test("rememberInstruction: most recent first, deduplicated, bounded", () => {
  assert.deepEqual(rememberInstruction([], "  Add docstrings "), ["Add docstrings"]);
  assert.deepEqual(rememberInstruction(["a", "b", "c"], "b"), ["b", "a", "c"]);
  assert.deepEqual(rememberInstruction(["a"], "   "), ["a"]);
  assert.deepEqual(rememberInstruction(undefined, "x"), ["x"]);
  const many = Array.from({ length: 20 }, (_, i) => `i${i}`);
  const out = rememberInstruction(many, "new");
  assert.equal(out.length, MAX_RECENT_INSTRUCTIONS);
  assert.equal(out[0], "new");
});

test("instructionItems: the typed text first, then recent ones", () => {
  assert.deepEqual(instructionItems("", ["a", "b"]), [
    { label: "a", description: "recent" },
    { label: "b", description: "recent" },
  ]);
  assert.deepEqual(instructionItems(" Add hints ", ["a"]), [
    { label: "Add hints", description: "new instruction", alwaysShow: true },
    { label: "a", description: "recent" },
  ]);
  assert.equal(instructionItems("a", ["a"]).length, 1);
});

test("classifyProbe maps spawn errors and exit codes", () => {
  assert.equal(classifyProbe(0, undefined, ""), undefined);
  assert.equal(classifyProbe(null, "ENOENT", "")?.kind, "python-missing");
  assert.equal(classifyProbe(PROBE_PACKAGE_MISSING, undefined, "")?.kind, "package-missing");
  assert.equal(classifyProbe(PROBE_PYTHON_TOO_OLD, undefined, "")?.kind, "python-too-old");
  assert.equal(classifyProbe(1, undefined, "SyntaxError")?.kind, "python-missing");
});

test("serverExitMessage names a missing module and the install command", () => {
  const python = { command: "/v/bin/python", args: [], source: "setting" as const };
  const tail = "Traceback (most recent call last):\n  File ...\nModuleNotFoundError: No module named 'pygls'\n";
  assert.match(serverExitMessage(tail, python), /could not import "pygls" with "\/v\/bin\/python"/);
  assert.match(serverExitMessage(tail, python), /-m pip install -e/);
  assert.match(serverExitMessage("boom\nRuntimeError: no CUDA\n\n", python), /\(RuntimeError: no CUDA\)/);
  assert.match(serverExitMessage("", python), /no output/);
});

test("crashPolicy restarts at most 3 times in 3 minutes", () => {
  let crashes: number[] = [];
  const decisions = [0, 1000, 2000, 3000].map((t) => {
    const p = crashPolicy(crashes, t);
    crashes = p.crashes;
    return p.restart;
  });
  assert.deepEqual(decisions, [true, true, true, false]);
  assert.equal(crashPolicy([0, 1000, 2000], 200_000).restart, true, "old crashes are forgotten");
  assert.equal(tailOf("abcdef", 3), "def");
});

test("the probe lists missing modules; the message says which", () => {
  assert.match(PROBE_SCRIPT, /"lsp_server"/);
  assert.match(PROBE_SCRIPT, /"torch"/);
  const python = { command: "python3", args: [], source: "default" as const };
  assert.match(
    launchProblemMessage({ kind: "package-missing", detail: "torch transformers" }, python),
    /dependencies are incomplete \(missing: torch, transformers\)/,
  );
  assert.match(
    launchProblemMessage({ kind: "package-missing", detail: "lsp_server engine" }, python),
    /module lsp_server\) is not installed for "python3"/,
  );
});

test("error messages carry the fix command", () => {
  const python = { command: "/home/me/my env/bin/python", args: [], source: "setting" as const };
  const missing = launchProblemMessage({ kind: "package-missing", detail: "" }, python);
  assert.match(missing, /"\/home\/me\/my env\/bin\/python" -m pip install -e <path to the copy-as-decode repository>/);
  assert.match(missing, /make setup/);
  const noPython = launchProblemMessage(
    { kind: "python-missing", detail: "ENOENT" },
    { command: "python3", args: [], source: "default" },
  );
  assert.match(noPython, /cannot run the Python interpreter "python3"/);
  assert.match(noPython, /copyAsDecode\.pythonPath/);
});
