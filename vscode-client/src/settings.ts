/**
 * The extension's pure logic: which interpreter launches the server, how it is launched, the
 * arguments of the server's edit command, the recent-instruction list and the error messages.
 *
 * Nothing here imports `vscode`, so `npm test` checks it with plain Node (no VS Code download).
 */

import * as os from "os";
import * as path from "path";

/** Settings section shared with the server (it pulls it with `workspace/configuration`). */
export const SECTION = "copyAsDecode";

/** The server's commands; the extension's own palette ids must differ from them (see README). */
export const SERVER_EDIT_COMMAND = "copyAsDecode.server.edit";
export const SERVER_APPLY_COMMAND = "copyAsDecode.server.applyUpdate";

/** The server is `python -m lsp_server` (the same module the console script `copy-as-decode serve` runs). */
export const SERVER_MODULE = "lsp_server";

/** Keys the server reads from the section (engine/settings/schema.py `Settings`), per document. */
export const SERVER_KEYS = [
  "model",
  "device",
  "dtype",
  "backend",
  "selector",
  "threads",
  "contextSize",
  "batchSize",
  "gpuLayers",
  "flashAttention",
  "paddedSteps",
  "prefixCacheTokens",
  "mode",
  "maxNewTokens",
  "contextLines",
  "promptStyle",
  "verify",
  "applyWindowLines",
  "applyMaxLines",
  "applyMode",
  "wholeDocumentLines",
  "warmUp",
  "warmUpDelayMs",
  "warmUpMaxTokens",
  "checkTimeout",
  "candidates",
  "maxRounds",
  "chatMaxTokens",
] as const;

/**
 * `applyMode` values (engine/core/choices.py `APPLY_MODES`). With "preview" the server sends every
 * edit as a WorkspaceEdit whose AnnotatedTextEdits carry a change annotation with
 * `needsConfirmation: true`; vscode-languageclient turns that into WorkspaceEditEntryMetadata and
 * VS Code opens the Refactor Preview, so the edit lands only when the user applies it. A
 * destructive "fix" arrives that way in every mode. Nothing to do in the client beyond the
 * capability `workspace.workspaceEdit.changeAnnotationSupport`, which vscode-languageclient sends.
 */
export const APPLY_MODES = ["stream", "final", "preview"] as const;

/** The named `selector` values (engine/core/choices.py `SELECTOR_CHOICES`); anything else is an
 * adapter folder, which the server accepts from a workspace only under a path of `allowedModels`. */
export const SELECTOR_CHOICES = ["auto", "none"] as const;

/**
 * Keys the server honours only from initializationOptions (user-level settings), for safety: a
 * workspace must not run remote code or a check command of its choosing, widen the allowed models,
 * or send your code (and your API key) to another vLLM server. The key itself is never a setting:
 * `apiKeyEnv` only names the environment variable the server reads it from.
 */
export const USER_ONLY_KEYS = [
  "trustRemoteCode",
  "allowedModels",
  "serverUrl",
  "servedModel",
  "apiKeyEnv",
  "checkCommand",
] as const;

/**
 * Settings whose change needs a new server process: the interpreter and its arguments, and the
 * user-only keys (initializationOptions are read once). The rest reach the running server: it
 * re-pulls `workspace/configuration` on didChangeConfiguration.
 */
export const RESTART_SETTINGS = [
  `${SECTION}.pythonPath`,
  `${SECTION}.serverArgs`,
  ...USER_ONLY_KEYS.map((k) => `${SECTION}.${k}`),
];

/** What `WorkspaceConfiguration.inspect` says about one key (only the scopes we use). */
export interface InspectedValue {
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}
export type Inspect = (key: string) => InspectedValue | undefined;

/**
 * The section as the server should see it for one scope: only the server's keys, and only those
 * the user set (folder over workspace over user). VS Code's defaults are left out on purpose:
 * the server layers editor settings over `.copy-as-decode.toml` / pyproject.toml, so a default
 * sent as if it were set would hide the workspace's files; unknown keys (pythonPath, trace)
 * would make the server warn.
 */
export function explicitSettings(inspect: Inspect): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of SERVER_KEYS) {
    const i = inspect(key);
    const value = i?.workspaceFolderValue ?? i?.workspaceValue ?? i?.globalValue;
    if (value !== undefined && value !== null) {
      out[key] = value;
    }
  }
  return out;
}

/** initializationOptions: the user-level (global) values, including the user-only keys. */
export function userLevelSettings(inspect: Inspect): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of [...SERVER_KEYS, ...USER_ONLY_KEYS]) {
    const value = inspect(key)?.globalValue;
    if (value !== undefined && value !== null) {
      out[key] = value;
    }
  }
  return out;
}

export const MAX_RECENT_INSTRUCTIONS = 10;

export type EditKind = "fix" | "edit";

/** LSP position/range (0-based line, UTF-16 character offsets). */
export interface Position {
  line: number;
  character: number;
}
export interface Range {
  start: Position;
  end: Position;
}

/** The single argument of `copyAsDecode.server.edit`. `range: null` edits the whole document;
 * `instruction: null` with kind "fix" lets the server use "Fix the bug". `focus` is where the
 * user pointed (the server's prompt says "The problem is at or near line K"); null: no hint. */
export interface EditArguments {
  uri: string;
  range: Range | null;
  instruction: string | null;
  kind: EditKind;
  focus: Position | null;
}

/** A diagnostic as far as "AI fix" cares: where it is and what it says. */
export interface DiagnosticInfo {
  range: Range;
  message: string;
}

/** An interpreter plus the arguments that come before `-m lsp_server` (e.g. `conda run -n x python`). */
export interface PythonCommand {
  command: string;
  args: string[];
  /** Where it came from, for the log and for error messages. */
  source: "setting" | "python-extension" | "default";
}

export interface PythonInputs {
  /** `copyAsDecode.pythonPath` (empty or whitespace: not set). */
  configured: string | undefined;
  /** The Python extension's execution command for the resource, when that extension is installed. */
  pythonExtension: string[] | undefined;
  /** Folder that `${workspaceFolder}` expands to. */
  workspaceFolder?: string;
  platform?: NodeJS.Platform;
  home?: string;
}

/** Expand `${workspaceFolder}`, `${userHome}` and a leading `~` in a path setting. */
export function expandPath(value: string, workspaceFolder?: string, home: string = os.homedir()): string {
  let out = value.trim();
  if (workspaceFolder !== undefined) {
    out = out.split("${workspaceFolder}").join(workspaceFolder);
  }
  out = out.split("${userHome}").join(home);
  if (out === "~") {
    return home;
  }
  if (out.startsWith("~/") || out.startsWith("~\\")) {
    return path.join(home, out.slice(2));
  }
  return out;
}

/**
 * Decide the interpreter: the setting if set, else the Python extension's selected interpreter,
 * else `python3` (`python` on Windows, where `python3` is often the Store stub).
 */
export function resolvePython(inputs: PythonInputs): PythonCommand {
  const configured = inputs.configured?.trim();
  if (configured) {
    return { command: expandPath(configured, inputs.workspaceFolder, inputs.home), args: [], source: "setting" };
  }
  const fromExtension = (inputs.pythonExtension ?? []).filter((part) => part.length > 0);
  if (fromExtension.length > 0) {
    return { command: fromExtension[0], args: fromExtension.slice(1), source: "python-extension" };
  }
  const platform = inputs.platform ?? process.platform;
  return { command: platform === "win32" ? "python" : "python3", args: [], source: "default" };
}

/**
 * Read the execution command from the Python extension's exported API, tolerating its versions:
 * `settings.getExecutionDetails(resource).execCommand` (current) or
 * `environments.getActiveEnvironmentPath(resource).path` (environments API).
 */
export function pythonFromExtensionApi(api: unknown, resource?: unknown): string[] | undefined {
  if (typeof api !== "object" || api === null) {
    return undefined;
  }
  const anyApi = api as {
    settings?: { getExecutionDetails?: (r?: unknown) => { execCommand?: unknown } | undefined };
    environments?: { getActiveEnvironmentPath?: (r?: unknown) => { path?: unknown } | undefined };
  };
  try {
    const exec = anyApi.settings?.getExecutionDetails?.(resource)?.execCommand;
    if (Array.isArray(exec) && exec.length > 0 && exec.every((p) => typeof p === "string")) {
      return exec as string[];
    }
  } catch {
    // fall through to the environments API
  }
  try {
    const env = anyApi.environments?.getActiveEnvironmentPath?.(resource);
    if (env && typeof env.path === "string" && env.path.length > 0) {
      return [env.path];
    }
  } catch {
    // no usable API
  }
  return undefined;
}

/** What vscode-languageclient's `Executable` needs (transport defaults to stdio). */
export interface ServerLaunch {
  command: string;
  args: string[];
  options: { env: NodeJS.ProcessEnv; cwd?: string };
}

/** `python [prefix args] -m lsp_server [serverArgs]`, unbuffered so the log shows up live. */
export function buildServerLaunch(
  python: PythonCommand,
  serverArgs: unknown,
  baseEnv: NodeJS.ProcessEnv = process.env,
  cwd?: string,
): ServerLaunch {
  const extra = Array.isArray(serverArgs) ? serverArgs.filter((a): a is string => typeof a === "string") : [];
  const options: ServerLaunch["options"] = { env: { ...baseEnv, PYTHONUNBUFFERED: "1" } };
  if (cwd !== undefined) {
    options.cwd = cwd;
  }
  return { command: python.command, args: [...python.args, "-m", SERVER_MODULE, ...extra], options };
}

/**
 * The command's argument. The selection goes as it is, also when empty (the cursor): the server
 * then edits the whole document when it is short, else the top-level block around the cursor.
 * `selection: null` (no editor selection at all) asks for the whole document.
 */
export function buildEditArguments(
  uri: string,
  selection: Range | null,
  instruction: string | null,
  kind: EditKind,
  focus: Position | null = null,
): EditArguments {
  const trimmed = instruction?.trim();
  return { uri, range: selection, instruction: trimmed ? trimmed : null, kind, focus };
}

/** The single argument of `copyAsDecode.server.applyUpdate`: the update merged into the document. */
export interface ApplyArguments {
  uri: string;
  update: string;
  instruction: string | null;
}

/** The arguments of "Apply Clipboard", or undefined when the clipboard holds nothing to apply. */
export function buildApplyArguments(uri: string, clipboard: string, instruction: string | null = null): ApplyArguments | undefined {
  if (!clipboard.trim()) {
    return undefined;
  }
  const trimmed = instruction?.trim();
  return { uri, update: clipboard, instruction: trimmed ? trimmed : null };
}

/**
 * Where "AI fix" from the palette points the model, as the server's own "AI fix" code action
 * does (lsp_server/actions.py `_focus`): the first diagnostic's start, else the cursor (an empty
 * selection or one inside a line); null for a selection over several lines (no hint).
 */
export function fixFocus(selection: Range, diagnostics: readonly DiagnosticInfo[]): Position | null {
  if (diagnostics.length > 0) {
    return { ...diagnostics[0].range.start };
  }
  if (selection.start.line === selection.end.line) {
    return { ...selection.start };
  }
  return null;
}

/**
 * The fix instruction from the diagnostics under the selection, as the server's code action
 * builds it (lsp_server/actions.py `fix_instruction`): "Fix: <message>; <message>" (whitespace
 * collapsed, duplicates dropped); null without diagnostics (the server then says "Fix the bug").
 */
export function fixInstruction(diagnostics: readonly DiagnosticInfo[]): string | null {
  const messages: string[] = [];
  for (const d of diagnostics) {
    const message = d.message.split(/\s+/).filter((w) => w.length > 0).join(" ");
    if (message && !messages.includes(message)) {
      messages.push(message);
    }
  }
  return messages.length > 0 ? `Fix: ${messages.join("; ")}` : null;
}

/** True when an edit command's arguments still need an instruction from the user ("AI edit…"). */
export function needsInstruction(args: unknown): args is EditArguments {
  if (typeof args !== "object" || args === null) {
    return false;
  }
  const a = args as Partial<EditArguments>;
  return a.kind === "edit" && (a.instruction === null || a.instruction === undefined || a.instruction === "");
}

/** Most recent first, no duplicates (trimmed), at most `max` entries; empty instructions are ignored. */
export function rememberInstruction(
  recent: readonly string[] | undefined,
  instruction: string,
  max: number = MAX_RECENT_INSTRUCTIONS,
): string[] {
  const list = (recent ?? []).filter((s) => typeof s === "string" && s.trim().length > 0);
  const value = instruction.trim();
  if (!value) {
    return list.slice(0, max);
  }
  return [value, ...list.filter((s) => s.trim() !== value)].slice(0, max);
}

export interface InstructionItem {
  label: string;
  description?: string;
  /** Shown whatever the filter (the text being typed). */
  alwaysShow?: boolean;
}

/**
 * Items of the instruction picker: what the user is typing (as a new instruction) first, then the
 * recent instructions. Typing filters the recent ones; Enter takes the highlighted item.
 */
export function instructionItems(typed: string, recent: readonly string[]): InstructionItem[] {
  const value = typed.trim();
  const items: InstructionItem[] = [];
  if (value && !recent.includes(value)) {
    items.push({ label: value, description: "new instruction", alwaysShow: true });
  }
  for (const r of recent) {
    items.push({ label: r, description: "recent" });
  }
  return items;
}

/** Why the server could not start, from a pre-flight probe of the interpreter. */
export type LaunchProblem =
  | { kind: "python-missing"; detail: string }
  | { kind: "package-missing"; detail: string }
  | { kind: "python-too-old"; detail: string };

/** Exit code of the probe script when modules are missing / Python is too old. */
export const PROBE_PACKAGE_MISSING = 3;
export const PROBE_PYTHON_TOO_OLD = 4;

/** Top-level modules the server needs; the probe looks for them without importing (fast). */
export const REQUIRED_MODULES = [SERVER_MODULE, "engine", "pygls", "lsprotocol", "torch", "transformers"];

/** A tiny script run with the chosen interpreter (and the server's cwd) before the server starts. */
export const PROBE_SCRIPT = [
  "import sys, importlib.util",
  `sys.exit(${PROBE_PYTHON_TOO_OLD}) if sys.version_info < (3, 10) else None`,
  `missing = [m for m in ${JSON.stringify(REQUIRED_MODULES)} if importlib.util.find_spec(m) is None]`,
  "print(' '.join(missing), file=sys.stderr)",
  `sys.exit(${PROBE_PACKAGE_MISSING} if missing else 0)`,
].join("\n");

/** Map the probe's outcome to a problem (undefined: fine). `errorCode` is Node's spawn error code. */
export function classifyProbe(
  exitCode: number | null,
  errorCode: string | undefined,
  stderr: string,
): LaunchProblem | undefined {
  if (errorCode === "ENOENT" || errorCode === "EACCES") {
    return { kind: "python-missing", detail: errorCode };
  }
  if (exitCode === 0) {
    return undefined;
  }
  if (exitCode === PROBE_PACKAGE_MISSING) {
    return { kind: "package-missing", detail: stderr.trim() };
  }
  if (exitCode === PROBE_PYTHON_TOO_OLD) {
    return { kind: "python-too-old", detail: stderr.trim() };
  }
  return { kind: "python-missing", detail: (stderr.trim() || `exit code ${exitCode}`).slice(0, 500) };
}

function shellQuote(s: string): string {
  return /^[A-Za-z0-9_\-./:=@+]+$/.test(s) ? s : `"${s.replace(/(["\\$`])/g, "\\$1")}"`;
}

/** The user-facing message for a launch problem, including the command that fixes it. */
export function launchProblemMessage(problem: LaunchProblem, python: PythonCommand): string {
  const exe = [python.command, ...python.args].map(shellQuote).join(" ");
  const where =
    python.source === "setting"
      ? "set in copyAsDecode.pythonPath"
      : python.source === "python-extension"
        ? "selected in the Python extension"
        : "the default; set copyAsDecode.pythonPath to choose another";
  switch (problem.kind) {
    case "python-missing":
      return (
        `Copy-as-Decode: cannot run the Python interpreter "${exe}" (${where}): ${problem.detail}. ` +
        `Install Python 3.10+ or point copyAsDecode.pythonPath at an interpreter that has the copy-as-decode ` +
        `package (in the repository: \`make setup\`, then use .venv/bin/python).`
      );
    case "python-too-old":
      return (
        `Copy-as-Decode: the Python interpreter "${exe}" (${where}) is older than 3.10. ` +
        `Point copyAsDecode.pythonPath at Python 3.10+ (in the repository: \`make setup\`, then use .venv/bin/python).`
      );
    case "package-missing": {
      const modules = problem.detail.split(/\s+/).filter((m) => m.length > 0);
      const what =
        modules.length === 0 || modules.includes(SERVER_MODULE)
          ? `the copy-as-decode package (module ${SERVER_MODULE}) is not installed`
          : `the copy-as-decode package's dependencies are incomplete (missing: ${modules.join(", ")})`;
      return (
        `Copy-as-Decode: ${what} for "${exe}" (${where}). ` +
        `Fix: \`${exe} -m pip install -e <path to the copy-as-decode repository>\`, ` +
        `or run \`make setup\` in the repository and set copyAsDecode.pythonPath to its .venv/bin/python.`
      );
    }
  }
}

/**
 * Explain a server that died while starting, from the tail of its stderr: an import error gets
 * the install command, anything else its last line (the full output is in the log).
 */
export function serverExitMessage(stderrTail: string, python: PythonCommand): string {
  const exe = [python.command, ...python.args].map(shellQuote).join(" ");
  const missing = [...stderrTail.matchAll(/ModuleNotFoundError: No module named '([^']+)'/g)].pop();
  if (missing) {
    return (
      `Copy-as-Decode: the server could not import "${missing[1]}" with "${exe}". ` +
      `Fix: \`${exe} -m pip install -e <path to the copy-as-decode repository>\` ` +
      `(or \`make setup\` in the repository, then set copyAsDecode.pythonPath to its .venv/bin/python).`
    );
  }
  const lines = stderrTail
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
  const last = lines.length > 0 ? lines[lines.length - 1] : "no output";
  return `Copy-as-Decode: the server stopped while starting (${last}). Its output is in the log (Copy-as-Decode: Show Log).`;
}

/** Keep the last `max` characters of a growing log. */
export function tailOf(text: string, max: number = 8000): string {
  return text.length > max ? text.slice(text.length - max) : text;
}

/**
 * After a crash of a server that was running: restart unless it crashed more than `max` times
 * within `windowMs`. Returns the crash times to keep and the decision.
 */
export function crashPolicy(
  crashes: readonly number[],
  now: number,
  max: number = 3,
  windowMs: number = 180_000,
): { crashes: number[]; restart: boolean } {
  const recent = [...crashes.filter((t) => now - t < windowMs), now];
  return { crashes: recent, restart: recent.length <= max };
}
