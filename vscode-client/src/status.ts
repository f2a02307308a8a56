/**
 * The status bar item: server starting / model loading / ready / editing (with progress) / error.
 *
 * States come from four places: the language client's own state (starting, running, stopped),
 * the server's work-done progress ("Loading model", "AI edit" with percentages), the server's
 * `copyAsDecode/status` notification (loading, ready, editing, error) and the lifetime of edit
 * commands the extension forwards (editing until the command returns).
 * Once the server is ready, the tooltip also shows the summary of `copy-as-decode doctor`'s report
 * for the active document (the server's settings command with `doctor: true`).
 * `describeStatus` is pure; `StatusView` only copies its result onto a status bar item.
 */

import type * as vscode from "vscode";

export type ServerState = "stopped" | "starting" | "loading" | "ready" | "editing" | "error";

export interface Status {
  state: ServerState;
  /** Free text from the server or the extension (model name, error message, ...). */
  message?: string;
  /** 0..100 while editing, when the server reports it. */
  percentage?: number;
}

/** Params of the server's `copyAsDecode/status` notification. */
export interface StatusNotification {
  state: "loading" | "ready" | "editing" | "error";
  message?: string;
  percentage?: number;
}

export const STATUS_NOTIFICATION = "copyAsDecode/status";
/** The server's settings command; with `doctor: true` it answers `copy-as-decode doctor`'s report too. */
export const SERVER_SETTINGS_COMMAND = "copyAsDecode.server.settings";

/** The value of a work-done `$/progress` notification (LSP WorkDoneProgressBegin/Report/End). */
export interface WorkDoneValue {
  kind: "begin" | "report" | "end";
  title?: string;
  message?: string;
  percentage?: number;
}

export interface StatusLook {
  text: string;
  tooltip: string;
  /** Theme colour id of the item's background, if any. */
  background?: "statusBarItem.errorBackground" | "statusBarItem.warningBackground";
}

const NAME = "Copy-as-Decode";

/** Turn a notification's params into a Status (unknown states and bad numbers are dropped). */
export function statusFromNotification(params: unknown): Status | undefined {
  if (typeof params !== "object" || params === null) {
    return undefined;
  }
  const p = params as Partial<StatusNotification>;
  if (p.state !== "loading" && p.state !== "ready" && p.state !== "editing" && p.state !== "error") {
    return undefined;
  }
  const status: Status = { state: p.state };
  if (typeof p.message === "string" && p.message.length > 0) {
    status.message = p.message;
  }
  if (typeof p.percentage === "number" && Number.isFinite(p.percentage)) {
    status.percentage = Math.max(0, Math.min(100, Math.round(p.percentage)));
  }
  return status;
}

/**
 * The tooltip line of the settings command's `doctor` report: its summary (mode, model, backend,
 * device, threads, verify rule, the probe's estimate), or why the configuration cannot run.
 */
export function doctorSummary(reply: unknown): string | undefined {
  const doctor = (reply as { doctor?: unknown } | null)?.doctor;
  if (typeof doctor !== "object" || doctor === null) {
    return undefined;
  }
  const d = doctor as { ok?: unknown; summary?: unknown; error?: unknown; fix?: unknown };
  if (d.ok === true && typeof d.summary === "string" && d.summary) {
    return d.summary;
  }
  if (d.ok === false && typeof d.error === "string") {
    return `cannot run: ${d.error}${typeof d.fix === "string" && d.fix ? ` (fix: ${d.fix})` : ""}`;
  }
  return undefined;
}

/** `doctor`: the summary of the doctor report, shown in the tooltip while the server is ready or editing. */
export function describeStatus(status: Status, doctor?: string): StatusLook {
  const detail = status.message ? `: ${status.message}` : "";
  const hint = (doctor && (status.state === "ready" || status.state === "editing") ? `\n${doctor}` : "") +
    "\nClick to show the log.";
  switch (status.state) {
    case "stopped":
      return { text: `$(circle-slash) ${NAME}`, tooltip: `${NAME} server stopped${detail}${hint}` };
    case "starting":
      return { text: `$(sync~spin) ${NAME}: starting`, tooltip: `${NAME} server starting${detail}${hint}` };
    case "loading":
      return { text: `$(loading~spin) ${NAME}: loading model`, tooltip: `Loading the model${detail}${hint}` };
    case "ready":
      return { text: `$(check) ${NAME}`, tooltip: `${NAME} ready${detail}${hint}` };
    case "editing": {
      const pct = status.percentage !== undefined ? ` ${status.percentage}%` : "";
      return { text: `$(sync~spin) ${NAME}: editing${pct}`, tooltip: `AI edit in progress${detail}${hint}` };
    }
    case "error":
      return {
        text: `$(error) ${NAME}`,
        tooltip: `${NAME} error${detail}${hint}`,
        background: "statusBarItem.errorBackground",
      };
  }
}

/**
 * Combine the client's lifecycle with server notifications and pending edits: while edits are
 * pending the item says "editing" even if the server sends no status of its own; an error stays
 * until the server reports something else or restarts.
 */
export class StatusModel {
  private base: Status = { state: "stopped" };
  private pendingEdits = 0;
  private editProgress: Status | undefined;
  /** Work-done progress the server reports, by token (a model load or an edit). */
  private readonly progress = new Map<string, Status>();
  /** The summary of the server's doctor report for the model in use (undefined: not asked yet). */
  doctor: string | undefined;

  current(): Status {
    if (this.base.state === "error" || this.base.state === "starting" || this.base.state === "stopped") {
      return this.base;
    }
    const running = [...this.progress.values()];
    const loading = running.filter((p) => p.state === "loading").pop();
    if (this.base.state === "loading") {
      return this.base;
    }
    if (loading) {
      return loading;
    }
    const editing = running.filter((p) => p.state === "editing").pop();
    if (editing) {
      return editing;
    }
    if (this.editProgress) {
      return this.editProgress;
    }
    if (this.pendingEdits > 0) {
      return { state: "editing" };
    }
    return this.base;
  }

  /** The language client's state changed. */
  client(state: "starting" | "running" | "stopped", message?: string): void {
    if (state === "starting") {
      this.base = { state: "starting" };
      this.doctor = undefined;
      this.pendingEdits = 0;
      this.editProgress = undefined;
      this.progress.clear();
    } else if (state === "running") {
      if (this.base.state === "starting" || this.base.state === "stopped") {
        this.base = { state: "ready" };
      }
    } else if (this.base.state !== "error") {
      this.base = message ? { state: "stopped", message } : { state: "stopped" };
      this.pendingEdits = 0;
      this.editProgress = undefined;
      this.progress.clear();
    }
  }

  /** The server said something (`copyAsDecode/status`). */
  server(status: Status): void {
    if (status.state === "loading") {
      this.doctor = undefined; // another model: its report is asked for once it is ready
    }
    if (status.state === "editing") {
      this.editProgress = status;
      if (this.base.state === "loading") {
        this.base = { state: "ready" }; // editing means the model is there
      }
      return;
    }
    this.editProgress = undefined;
    this.base = status;
  }

  /**
   * A `$/progress` value of the server's work-done progress (begin / report / end). A title
   * mentioning "load" is a model load, anything else an edit ("AI edit").
   */
  workDone(token: string | number, value: WorkDoneValue): void {
    const key = String(token);
    if (value.kind === "end") {
      this.progress.delete(key);
      return;
    }
    const previous = this.progress.get(key);
    const state: ServerState =
      value.kind === "begin" ? (/load/i.test(value.title ?? "") ? "loading" : "editing") : (previous?.state ?? "editing");
    const next: Status = { state };
    const message = value.message ?? previous?.message;
    if (message) {
      next.message = message;
    }
    const percentage = typeof value.percentage === "number" ? value.percentage : previous?.percentage;
    if (percentage !== undefined && Number.isFinite(percentage)) {
      next.percentage = Math.max(0, Math.min(100, Math.round(percentage)));
    }
    this.progress.set(key, next);
  }

  /** The extension reports an error of its own (e.g. Python missing). */
  error(message: string): void {
    this.base = { state: "error", message };
  }

  editStarted(): void {
    this.pendingEdits += 1;
  }

  editFinished(): void {
    this.pendingEdits = Math.max(0, this.pendingEdits - 1);
    if (this.pendingEdits === 0) {
      this.editProgress = undefined;
    }
  }
}

/** Copies the model's state onto a status bar item. */
export class StatusView {
  readonly model = new StatusModel();

  constructor(
    private readonly item: vscode.StatusBarItem,
    private readonly themeColor: (id: string) => vscode.ThemeColor,
  ) {}

  update(mutate: (model: StatusModel) => void): void {
    mutate(this.model);
    const look = describeStatus(this.model.current(), this.model.doctor);
    this.item.text = look.text;
    this.item.tooltip = look.tooltip;
    this.item.backgroundColor = look.background ? this.themeColor(look.background) : undefined;
    this.item.show();
  }
}
