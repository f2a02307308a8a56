import assert from "node:assert/strict";
import { test } from "node:test";

import { describeStatus, doctorSummary, StatusModel, statusFromNotification } from "../src/status";

test("describeStatus: one look per state", () => {
  assert.match(describeStatus({ state: "starting" }).text, /starting/);
  assert.match(describeStatus({ state: "loading" }).text, /loading model/);
  assert.equal(describeStatus({ state: "ready" }).text, "$(check) Copy-as-Decode");
  assert.equal(describeStatus({ state: "editing", percentage: 42 }).text, "$(sync~spin) Copy-as-Decode: editing 42%");
  assert.equal(describeStatus({ state: "editing" }).text, "$(sync~spin) Copy-as-Decode: editing");
  const err = describeStatus({ state: "error", message: "Python not found" });
  assert.equal(err.background, "statusBarItem.errorBackground");
  assert.match(err.tooltip, /Python not found/);
});

test("statusFromNotification validates and clamps", () => {
  assert.deepEqual(statusFromNotification({ state: "editing", message: "x", percentage: 130.4 }), {
    state: "editing",
    message: "x",
    percentage: 100,
  });
  assert.deepEqual(statusFromNotification({ state: "ready", message: "" }), { state: "ready" });
  assert.equal(statusFromNotification({ state: "bogus" }), undefined);
  assert.equal(statusFromNotification(null), undefined);
});

test("StatusModel: lifecycle, server states and pending edits", () => {
  const m = new StatusModel();
  assert.equal(m.current().state, "stopped");
  m.client("starting");
  assert.equal(m.current().state, "starting");
  m.client("running");
  assert.equal(m.current().state, "ready");
  m.server({ state: "loading", message: "default" });
  assert.deepEqual(m.current(), { state: "loading", message: "default" });
  m.editStarted();
  assert.equal(m.current().state, "loading", "loading the model shows while the first edit waits");
  m.server({ state: "ready" });
  assert.equal(m.current().state, "editing");
  m.server({ state: "editing", percentage: 50 });
  assert.deepEqual(m.current(), { state: "editing", percentage: 50 });
  m.server({ state: "ready" });
  assert.equal(m.current().state, "editing", "still editing while the request is pending");
  m.editFinished();
  assert.equal(m.current().state, "ready");
});

test("StatusModel: an extension error sticks until a restart", () => {
  const m = new StatusModel();
  m.client("starting");
  m.error("Python not found");
  m.client("stopped");
  assert.deepEqual(m.current(), { state: "error", message: "Python not found" });
  m.client("starting");
  assert.equal(m.current().state, "starting");
});

test("StatusModel: work-done progress gives loading and editing with a percentage", () => {
  const m = new StatusModel();
  m.client("starting");
  m.client("running");
  m.editStarted();
  m.workDone("load-1", { kind: "begin", title: "Loading model", message: "default" });
  assert.deepEqual(m.current(), { state: "loading", message: "default" });
  m.workDone("load-1", { kind: "end" });
  m.workDone(7, { kind: "begin", title: "AI edit", percentage: 0 });
  assert.deepEqual(m.current(), { state: "editing", percentage: 0 });
  m.workDone(7, { kind: "report", percentage: 41.6, message: "3 ops" });
  assert.deepEqual(m.current(), { state: "editing", message: "3 ops", percentage: 42 });
  assert.equal(describeStatus(m.current()).text, "$(sync~spin) Copy-as-Decode: editing 42%");
  m.workDone(7, { kind: "end" });
  assert.equal(m.current().state, "editing", "the command has not returned yet");
  m.editFinished();
  assert.equal(m.current().state, "ready");
});

test("StatusModel: the server's editing status ends its loading status", () => {
  const m = new StatusModel();
  m.client("starting");
  m.client("running");
  m.editStarted();
  m.server({ state: "loading", message: "loading default" });
  m.server({ state: "editing", message: "fix: program with default" });
  assert.deepEqual(m.current(), { state: "editing", message: "fix: program with default" });
  m.server({ state: "ready", message: "done" });
  m.editFinished();
  assert.deepEqual(m.current(), { state: "ready", message: "done" });
});

test("doctorSummary: the report's summary, or why the configuration cannot run", () => {
  const summary = "program mode; default; llamacpp on cpu; 1 thread(s); verify auto means exact here";
  assert.equal(doctorSummary({ settings: {}, doctor: { ok: true, summary, lines: {} } }), summary);
  assert.equal(
    doctorSummary({ doctor: { ok: false, error: "GGUF file not found", fix: "set `model`" } }),
    "cannot run: GGUF file not found (fix: set `model`)",
  );
  assert.equal(doctorSummary({ doctor: { ok: false, error: "no llama_cpp", fix: "" } }), "cannot run: no llama_cpp");
  assert.equal(doctorSummary({ settings: {} }), undefined);
  assert.equal(doctorSummary(null), undefined);
  assert.equal(doctorSummary({ doctor: { ok: true } }), undefined);
});

test("describeStatus: the doctor summary is in the tooltip while ready or editing", () => {
  const summary = "program mode; default";
  assert.match(describeStatus({ state: "ready" }, summary).tooltip, /ready\nprogram mode; default\nClick/);
  assert.match(describeStatus({ state: "editing" }, summary).tooltip, /program mode; default/);
  assert.doesNotMatch(describeStatus({ state: "error", message: "x" }, summary).tooltip, /program mode/);
  assert.equal(describeStatus({ state: "ready" }).tooltip, "Copy-as-Decode ready\nClick to show the log.");
});

test("StatusModel: a restart or another model's load forgets the doctor summary", () => {
  const m = new StatusModel();
  m.client("starting");
  m.client("running");
  m.doctor = "program mode";
  m.server({ state: "ready" });
  assert.equal(m.doctor, "program mode");
  m.server({ state: "loading", message: "other" });
  assert.equal(m.doctor, undefined);
  m.doctor = "speculative mode";
  m.client("starting");
  assert.equal(m.doctor, undefined);
});
