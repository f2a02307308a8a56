/**
 * The VS Code side of copy-as-decode: a thin client in the style of ruff-vscode. It starts the
 * language server (`python -m lsp_server` over stdio), forwards the palette commands to the
 * server's `copyAsDecode.server.edit` command, asks for the instruction of "AI edit…" (also when
 * it comes from a server code action), sends the clipboard to `copyAsDecode.server.applyUpdate`
 * ("Apply Clipboard": merge a change written elsewhere into the active document), and shows the
 * server's state in the status bar.
 * All editing behaviour lives in the server: it applies its edits itself (workspace/applyEdit)
 * and reports work-done progress, so Neovim and VS Code get the same product. An edit to review
 * (applyMode "preview", or a destructive fix) comes as a WorkspaceEdit whose change annotation
 * has needsConfirmation: vscode-languageclient maps it to VS Code's edit metadata and VS Code
 * opens the Refactor Preview; the server's applyEdit returns when the user applies or discards.
 */

import { ChildProcess, execFile, spawn } from "child_process";
import * as vscode from "vscode";
import {
  CloseAction,
  ErrorAction,
  ErrorHandler,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
  State,
} from "vscode-languageclient/node";

import {
  buildApplyArguments,
  buildEditArguments,
  buildServerLaunch,
  classifyProbe,
  crashPolicy,
  DiagnosticInfo,
  EditArguments,
  EditKind,
  explicitSettings,
  fixFocus,
  fixInstruction,
  instructionItems,
  launchProblemMessage,
  LaunchProblem,
  needsInstruction,
  Position,
  PROBE_SCRIPT,
  PythonCommand,
  pythonFromExtensionApi,
  rememberInstruction,
  resolvePython,
  RESTART_SETTINGS,
  SECTION,
  SERVER_APPLY_COMMAND,
  SERVER_EDIT_COMMAND,
  serverExitMessage,
  tailOf,
  userLevelSettings,
} from "./settings";
import {
  doctorSummary,
  SERVER_SETTINGS_COMMAND,
  STATUS_NOTIFICATION,
  statusFromNotification,
  StatusView,
} from "./status";

const CLIENT_ID = "copyAsDecode";
const CLIENT_NAME = "Copy-as-Decode";
const RECENT_INSTRUCTIONS_KEY = "copyAsDecode.recentInstructions";
const PYTHON_EXTENSION_ID = "ms-python.python";
const PROBE_TIMEOUT_MS = 60_000;

let client: LanguageClient | undefined;
let serverProcess: ChildProcess | undefined;
/** Start/stop/restart run one after another on this chain. */
let lifecycle: Promise<void> = Promise.resolve();
let output: vscode.OutputChannel;
let status: StatusView;
let extensionContext: vscode.ExtensionContext;

export function activate(context: vscode.ExtensionContext): void {
  extensionContext = context;
  output = vscode.window.createOutputChannel(CLIENT_NAME);
  const item = vscode.window.createStatusBarItem("copyAsDecode.status", vscode.StatusBarAlignment.Right, 100);
  item.name = CLIENT_NAME;
  item.command = "copyAsDecode.showLog";
  status = new StatusView(item, (id) => new vscode.ThemeColor(id));
  context.subscriptions.push(output, item);

  context.subscriptions.push(
    vscode.commands.registerCommand("copyAsDecode.aiFix", () => paletteEdit("fix")),
    vscode.commands.registerCommand("copyAsDecode.aiEdit", () => paletteEdit("edit")),
    vscode.commands.registerCommand("copyAsDecode.applyClipboard", () => applyClipboard()),
    vscode.commands.registerCommand("copyAsDecode.restartServer", () => restart()),
    vscode.commands.registerCommand("copyAsDecode.showLog", () => output.show(true)),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (RESTART_SETTINGS.some((s) => e.affectsConfiguration(s))) {
        output.appendLine("Interpreter settings changed; restarting the server.");
        void restart();
      }
    }),
  );
  watchPythonExtension(context);
  void restart();
}

export async function deactivate(): Promise<void> {
  await lifecycle;
  await stopClient(detach());
}

/** Take the current client out of service at once (so its listeners stop talking to the server). */
function detach(): { client?: LanguageClient; process?: ChildProcess } {
  const current = { client, process: serverProcess };
  client = undefined;
  serverProcess = undefined;
  return current;
}

function restart(): Promise<void> {
  const old = detach();
  lifecycle = lifecycle.then(async () => {
    await stopClient(old);
    await stopClient(detach()); // one started meanwhile by an earlier restart
    await startClient();
  });
  return lifecycle;
}

async function stopClient(old: { client?: LanguageClient; process?: ChildProcess }): Promise<void> {
  if (old.client) {
    try {
      if (old.client.state !== State.Stopped) {
        await old.client.stop(5_000);
      }
    } catch (e) {
      output.appendLine(`Stopping the server failed: ${errorText(e)}`);
    }
    try {
      await old.client.dispose(1_000);
    } catch {
      // already gone
    }
  }
  const child = old.process;
  if (child && child.exitCode === null && child.signalCode === null) {
    child.kill();
  }
}

function firstFolder(): vscode.WorkspaceFolder | undefined {
  return vscode.workspace.workspaceFolders?.[0];
}

async function pythonCommand(): Promise<PythonCommand> {
  const folder = firstFolder();
  const config = vscode.workspace.getConfiguration(SECTION, folder?.uri);
  const configured = config.get<string>("pythonPath");
  let fromExtension: string[] | undefined;
  if (!configured?.trim()) {
    const ext = vscode.extensions.getExtension(PYTHON_EXTENSION_ID);
    if (ext) {
      try {
        const api = ext.isActive ? ext.exports : await ext.activate();
        fromExtension = pythonFromExtensionApi(api, folder?.uri);
      } catch (e) {
        output.appendLine(`The Python extension did not give an interpreter: ${errorText(e)}`);
      }
    }
  }
  return resolvePython({ configured, pythonExtension: fromExtension, workspaceFolder: folder?.uri.fsPath });
}

/** The server's working directory: the extension's own folder, never the workspace, because
 * `python -m` puts the cwd first on sys.path and a workspace must not shadow (or inject) the
 * server's modules. */
function serverCwd(): string {
  return extensionContext.extensionPath;
}

function probe(python: PythonCommand): Promise<LaunchProblem | undefined> {
  return new Promise((resolve) => {
    execFile(
      python.command,
      [...python.args, "-c", PROBE_SCRIPT],
      { timeout: PROBE_TIMEOUT_MS, windowsHide: true, cwd: serverCwd() },
      (error, _stdout, stderr) => {
        if (!error) {
          resolve(undefined);
          return;
        }
        const err = error as NodeJS.ErrnoException & { code?: string | number };
        const errorCode = typeof err.code === "string" ? err.code : undefined;
        const exitCode = typeof err.code === "number" ? err.code : null;
        resolve(classifyProbe(exitCode, errorCode, `${stderr ?? ""}${exitCode === null && !errorCode ? err.message : ""}`));
      },
    );
  });
}

async function startClient(): Promise<void> {
  status.update((m) => m.client("starting"));
  const python = await pythonCommand();
  const problem = await probe(python);
  if (problem) {
    const message = launchProblemMessage(problem, python);
    output.appendLine(message);
    status.update((m) => m.error(problem.kind === "package-missing" ? "copy-as-decode not installed" : "Python not found"));
    void vscode.window.showErrorMessage(message, "Open Settings", "Show Log").then((choice) => {
      if (choice === "Open Settings") {
        void vscode.commands.executeCommand("workbench.action.openSettings", `${SECTION}.pythonPath`);
      } else if (choice === "Show Log") {
        output.show(true);
      }
    });
    return;
  }

  const folder = firstFolder();
  const config = vscode.workspace.getConfiguration(SECTION, folder?.uri);
  const launch = buildServerLaunch(python, config.get("serverArgs"), process.env, serverCwd());
  output.appendLine(`Starting the server (${python.source} interpreter): ${[launch.command, ...launch.args].join(" ")}`);
  let stderrTail = "";
  // Spawned here (not by the client) to keep the tail of stderr for the error message; the
  // client still copies stderr into the log.
  const serverOptions: ServerOptions = async () => {
    const child = spawn(launch.command, launch.args, { ...launch.options, stdio: "pipe", windowsHide: true });
    child.stderr?.on("data", (data: Buffer) => {
      stderrTail = tailOf(stderrTail + data.toString());
    });
    child.on("error", (e) => output.appendLine(`Server process error: ${errorText(e)}`));
    if (client === created) {
      serverProcess = child;
    }
    return child;
  };
  let wasRunning = false;
  let crashes: number[] = [];
  const errorHandler: ErrorHandler = {
    error: (_error, _message, count) => ({ action: (count ?? 0) <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown }),
    closed: () => {
      if (!wasRunning) {
        return { action: CloseAction.DoNotRestart, handled: true }; // start() reports it
      }
      const policy = crashPolicy(crashes, Date.now());
      crashes = policy.crashes;
      if (policy.restart) {
        output.appendLine("The server stopped; restarting it.");
        return { action: CloseAction.Restart, handled: true };
      }
      status.update((m) => m.error("the server keeps crashing"));
      return {
        action: CloseAction.DoNotRestart,
        message: "Copy-as-Decode: the server crashed several times; see Copy-as-Decode: Show Log, then run Copy-as-Decode: Restart Server.",
      };
    },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: "file" }, { scheme: "untitled" }],
    synchronize: { configurationSection: SECTION },
    initializationOptions: userLevelSettings((key) => vscode.workspace.getConfiguration(SECTION).inspect(key)),
    outputChannel: output,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    errorHandler,
    initializationFailedHandler: () => false,
    middleware: {
      workspace: {
        // Answer the server's pull with the keys the user set, not VS Code's defaults (settings.ts).
        configuration: async (params, token, next) => {
          const answer = await next(params, token);
          if (!Array.isArray(answer)) {
            return answer;
          }
          return params.items.map((item, i) => {
            if (item.section !== SECTION) {
              return answer[i];
            }
            const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined;
            const config = vscode.workspace.getConfiguration(SECTION, scope);
            return explicitSettings((key) => config.inspect(key));
          });
        },
        // Tell the server that something changed (settings: null); it pulls what it needs.
        // A client being replaced (interpreter changed) stays quiet.
        didChangeConfiguration: async (_sections, next) => {
          if (client === created && created.state === State.Running) {
            await next(undefined);
          }
        },
      },
      // Progress ("Loading model", "AI edit" with percentages) also drives the status bar item.
      handleWorkDoneProgress: (token, params, next) => {
        next(token, params);
        if (client === created) {
          status.update((m) => m.workDone(token, params));
        }
      },
      // Code actions run the server's command directly; "AI edit…" arrives without an instruction.
      executeCommand: async (command, args, next) => {
        if (command !== SERVER_EDIT_COMMAND) {
          return next(command, args);
        }
        let forwarded = args;
        if (needsInstruction(args[0])) {
          const instruction = await askInstruction();
          if (instruction === undefined) {
            return undefined;
          }
          forwarded = [{ ...args[0], instruction }, ...args.slice(1)];
        }
        return trackEdit(() => next(command, forwarded));
      },
    },
  };

  const created = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
  client = created;
  created.onDidChangeState((e) => {
    wasRunning = wasRunning || e.newState === State.Running;
    if (client !== created) {
      return;
    }
    const state = e.newState === State.Running ? "running" : e.newState === State.Starting ? "starting" : "stopped";
    status.update((m) => m.client(state));
  });
  created.onNotification(STATUS_NOTIFICATION, (params: unknown) => {
    const s = statusFromNotification(params);
    if (s && client === created) {
      status.update((m) => m.server(s));
      if (s.state === "ready" && status.model.doctor === undefined) {
        void askDoctor(created);
      }
    }
  });
  try {
    await created.start();
    output.appendLine("Server started.");
  } catch (e) {
    output.appendLine(`The server did not start: ${errorText(e)}`);
    const message = serverExitMessage(stderrTail, python);
    output.appendLine(message);
    status.update((m) => m.error("server did not start"));
    void vscode.window.showErrorMessage(message, "Show Log", "Restart Server").then((choice) => {
      if (choice === "Show Log") {
        output.show(true);
      } else if (choice === "Restart Server") {
        void restart();
      }
    });
  }
}

/** Run one edit request, showing "editing" until it returns. */
async function trackEdit<T>(run: () => Promise<T>): Promise<T> {
  status.update((m) => m.editStarted());
  try {
    return await run();
  } finally {
    status.update((m) => m.editFinished());
  }
}

/** The running client, or undefined after telling the user that the server is not running. */
async function runningClient(): Promise<LanguageClient | undefined> {
  await lifecycle;
  const running = client;
  if (running && running.state === State.Running) {
    return running;
  }
  const choice = await vscode.window.showErrorMessage(
    "Copy-as-Decode: the language server is not running.",
    "Show Log",
    "Restart Server",
  );
  if (choice === "Show Log") {
    output.show(true);
  } else if (choice === "Restart Server") {
    await restart();
  }
  return undefined;
}

/** "Apply Clipboard": the server merges the clipboard (a change written elsewhere) into the
 * active document, streamed in like an AI fix; a chat answer that names files (blocks headed by
 * their paths, a unified diff) is merged into each of them by the server and arrives as one
 * workspace edit, shown in the Refactor Preview (lsp_server/answers.py). */
async function applyClipboard(): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor) {
    void vscode.window.showInformationMessage("Copy-as-Decode: open the file to apply the clipboard to first (for an answer that names files, any file of its workspace folder).");
    return;
  }
  const running = await runningClient();
  if (!running) {
    return;
  }
  const args = buildApplyArguments(running.code2ProtocolConverter.asUri(editor.document.uri), await vscode.env.clipboard.readText());
  if (!args) {
    void vscode.window.showInformationMessage("Copy-as-Decode: the clipboard is empty; copy the change to apply first.");
    return;
  }
  await sendEdit(running, SERVER_APPLY_COMMAND, args, "apply");
}

async function paletteEdit(kind: EditKind): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor) {
    void vscode.window.showInformationMessage("Copy-as-Decode: open a file to edit first.");
    return;
  }
  const running = await runningClient();
  if (!running) {
    return;
  }
  const c2p = running.code2ProtocolConverter;
  let instruction: string | null = null;
  let focus: Position | null = null;
  if (kind === "edit") {
    const asked = await askInstruction();
    if (asked === undefined) {
      return;
    }
    instruction = asked;
  } else {
    // What the server's "AI fix" code action sends: the diagnostics under the cursor/selection
    // make the instruction, and the first one's start (else the cursor) is the focus hint.
    const selection = editor.selection;
    const diagnostics: DiagnosticInfo[] = vscode.languages
      .getDiagnostics(editor.document.uri)
      .filter((d) => d.range.intersection(selection) !== undefined)
      .map((d) => ({ range: c2p.asRange(d.range), message: d.message }));
    instruction = fixInstruction(diagnostics);
    focus = fixFocus(c2p.asRange(selection), diagnostics);
  }
  const args: EditArguments = buildEditArguments(
    c2p.asUri(editor.document.uri),
    c2p.asRange(editor.selection),
    instruction,
    kind,
    focus,
  );
  await sendEdit(running, SERVER_EDIT_COMMAND, args, `AI ${kind}`);
}

/** Run one of the server's edit commands, telling the user when the request itself fails. */
async function sendEdit(running: LanguageClient, command: string, args: object, what: string): Promise<void> {
  try {
    await trackEdit(() => running.sendRequest(ExecuteCommandRequest.type, { command, arguments: [args] }));
  } catch (e) {
    output.appendLine(`${what} failed: ${errorText(e)}`);
    void vscode.window.showErrorMessage(`Copy-as-Decode: ${what} failed: ${errorText(e)}`, "Show Log").then((c) => {
      if (c === "Show Log") {
        output.show(true);
      }
    });
  }
}

/** Ask for an edit instruction: type a new one or pick a recent one. Undefined when dismissed. */
function askInstruction(): Promise<string | undefined> {
  const recent = extensionContext.globalState.get<string[]>(RECENT_INSTRUCTIONS_KEY, []);
  const pick = vscode.window.createQuickPick();
  pick.title = "Copy-as-Decode: AI Edit";
  pick.placeholder = "Describe the edit (e.g. \"Add type hints\"), or pick a recent instruction";
  pick.items = instructionItems("", recent);
  pick.onDidChangeValue((value) => {
    pick.items = instructionItems(value, recent);
  });
  return new Promise((resolve) => {
    let accepted = false;
    pick.onDidAccept(() => {
      const chosen = (pick.selectedItems[0]?.label ?? pick.value).trim();
      if (!chosen) {
        return;
      }
      accepted = true;
      void extensionContext.globalState.update(RECENT_INSTRUCTIONS_KEY, rememberInstruction(recent, chosen));
      pick.hide();
      resolve(chosen);
    });
    pick.onDidHide(() => {
      pick.dispose();
      if (!accepted) {
        resolve(undefined);
      }
    });
    pick.show();
  });
}

/** Restart when the Python extension's interpreter changes and copyAsDecode.pythonPath is unset. */
function watchPythonExtension(context: vscode.ExtensionContext): void {
  const ext = vscode.extensions.getExtension(PYTHON_EXTENSION_ID);
  if (!ext) {
    return;
  }
  const subscribe = (api: unknown) => {
    const event = (api as { settings?: { onDidChangeExecutionDetails?: vscode.Event<unknown> } })?.settings
      ?.onDidChangeExecutionDetails;
    if (typeof event !== "function") {
      return;
    }
    context.subscriptions.push(
      event(() => {
        const configured = vscode.workspace.getConfiguration(SECTION, firstFolder()?.uri).get<string>("pythonPath");
        if (!configured?.trim()) {
          output.appendLine("The Python extension's interpreter changed; restarting the server.");
          void restart();
        }
      }),
    );
  };
  if (ext.isActive) {
    subscribe(ext.exports);
  } else {
    ext.activate().then(subscribe, () => undefined);
  }
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The doctor report's summary for the active document, into the status bar item's tooltip. */
async function askDoctor(running: LanguageClient): Promise<void> {
  const document = vscode.window.activeTextEditor?.document;
  if (!document) {
    return;
  }
  status.model.doctor = ""; // asked: no second request while this one runs
  try {
    const reply: unknown = await running.sendRequest(ExecuteCommandRequest.type, {
      command: SERVER_SETTINGS_COMMAND,
      arguments: [{ uri: document.uri.toString(), doctor: true }],
    });
    const summary = doctorSummary(reply);
    if (client === running && summary) {
      status.update((m) => {
        m.doctor = summary;
      });
    }
  } catch (e) {
    output.appendLine(`doctor report failed: ${errorText(e)}`);
  }
}
