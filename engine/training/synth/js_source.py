"""JavaScript functions from pinned npm packages under permissive licenses, extracted with acorn.

The packages are installed with ``npm install --prefix <cache>`` (``--ignore-scripts``: no package
code runs at install) and parsed by acorn (MIT, from npm, pinned with them) through a small Node
script this module writes next to them and talks to over stdin/stdout, one JSON object a line.
A package is used only when its ``package.json`` license is in :data:`ALLOWED_LICENSES`, and only
the folders listed for it (one copy of its sources: no CommonJS/AMD/minified duplicates).
Top-level functions are extracted: function declarations (exported or not), ``const f = function``
or arrow, and ``X.y = function`` assignments, each as its whole statement.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from engine.training.synth.functions import SourceFunction, size_ok

ALLOWED_LICENSES = {"MIT", "ISC", "BSD-2-Clause", "BSD-3-Clause", "Apache-2.0", "0BSD"}
ACORN = ("acorn", "8.19.0")


@dataclass(frozen=True)
class JsPackage:
    name: str
    version: str
    include: tuple[str, ...]  # files or folders (ending in "/") inside the package to mine

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"


PACKAGES = (
    JsPackage("lodash-es", "4.18.1", ("./",)),
    JsPackage("underscore", "1.13.8", ("modules/",)),
    JsPackage("ramda", "0.32.0", ("es/",)),
    JsPackage("semver", "7.8.6", ("functions/", "ranges/", "internal/", "classes/")),
    JsPackage("qs", "6.17.1", ("lib/",)),
    JsPackage("minimist", "1.2.8", ("index.js",)),
    JsPackage("d3-array", "3.2.5", ("dist/d3-array.mjs",)),
    JsPackage("d3-format", "3.1.3", ("dist/d3-format.mjs",)),
    JsPackage("d3-color", "3.1.1", ("dist/d3-color.mjs",)),
    JsPackage("d3-interpolate", "3.0.2", ("dist/d3-interpolate.mjs",)),
    JsPackage("d3-shape", "3.2.1", ("dist/d3-shape.mjs",)),
    JsPackage("d3-scale", "4.0.3", ("dist/d3-scale.mjs",)),
    JsPackage("moment", "2.31.0", ("src/lib/",)),
    JsPackage("js-yaml", "5.5.0", ("dist/js-yaml.mjs",)),
    JsPackage("diff", "9.0.0", ("libesm/",)),
    JsPackage("yargs-parser", "22.0.0", ("build/lib/",)),
    JsPackage("async", "3.2.6", ("dist/async.mjs",)),
    JsPackage("mathjs", "15.2.0", ("lib/esm/utils/", "lib/esm/function/")),
    JsPackage("decimal.js", "10.6.0", ("decimal.mjs",)),
    JsPackage(*ACORN, ("dist/acorn.mjs",)),
)

_NODE_SCRIPT = r"""
// Written by engine/training/synth/js_source.py: parse JavaScript with acorn, one JSON request per stdin line.
import * as acorn from "./node_modules/acorn/dist/acorn.mjs";
import readline from "node:readline";

const base = {ecmaVersion: "latest", locations: true, allowHashBang: true};
function parse(code) {
  try { return acorn.parse(code, {...base, sourceType: "module"}); }
  catch (error) { return acorn.parse(code, {...base, sourceType: "script"}); }
}
const isFunction = (node) => node && (node.type === "FunctionExpression" || node.type === "ArrowFunctionExpression");
function memberName(node) {
  if (node.type === "Identifier") return node.name;
  if (node.type === "MemberExpression" && !node.computed && node.property.type === "Identifier") {
    const object = memberName(node.object);
    return object ? object + "." + node.property.name : node.property.name;
  }
  if (node.type === "ThisExpression") return "this";
  return null;
}
function functionName(statement) {
  let node = statement;
  if ((node.type === "ExportNamedDeclaration" || node.type === "ExportDefaultDeclaration") && node.declaration)
    node = node.declaration;
  if (node.type === "FunctionDeclaration") return node.id ? node.id.name : "default";
  if (node.type === "VariableDeclaration" && node.declarations.length === 1) {
    const declarator = node.declarations[0];
    if (declarator.id.type === "Identifier" && isFunction(declarator.init)) return declarator.id.name;
  }
  if (node.type === "ExpressionStatement" && node.expression.type === "AssignmentExpression") {
    let right = node.expression;
    while (right.type === "AssignmentExpression") right = right.right;
    if (isFunction(right)) return memberName(node.expression.left);
  }
  return null;
}
const lines = readline.createInterface({input: process.stdin, crlfDelay: Infinity});
lines.on("line", (line) => {
  let reply;
  try {
    const request = JSON.parse(line);
    const tree = parse(request.code);
    if (request.op === "check") reply = {ok: true};
    else {
      const functions = [];
      for (const statement of tree.body) {
        const name = functionName(statement);
        if (name) functions.push({name, start: statement.start, end: statement.end,
                                  column: statement.loc.start.column});
      }
      reply = {ok: true, functions};
    }
  } catch (error) {
    reply = {ok: false, error: String(error && error.message)};
  }
  process.stdout.write(JSON.stringify(reply) + "\n");
});
"""


class JsSourceError(RuntimeError):
    """The JavaScript sources cannot be prepared; the message says what to install or change."""


def default_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "copy-as-decode" / "js-sources"


def _package_dir(cache: Path, name: str) -> Path:
    return cache / "node_modules" / name


def _installed_version(cache: Path, name: str) -> str | None:
    try:
        return json.loads((_package_dir(cache, name) / "package.json").read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None


def ensure_installed(cache: Path | None = None, packages: tuple[JsPackage, ...] = PACKAGES) -> Path:
    """Install the pinned packages into ``cache`` unless they already are; returns the cache folder."""
    cache = cache or default_cache()
    missing = [p for p in packages if _installed_version(cache, p.name) != p.version]
    if missing:
        npm = shutil.which("npm")
        if npm is None:
            raise JsSourceError("npm not found: install Node.js (>= 18, with npm) or build with --languages python")
        cache.mkdir(parents=True, exist_ok=True)
        command = [npm, "install", "--prefix", str(cache), "--ignore-scripts", "--no-audit", "--no-fund",
                   "--save-exact", *[p.spec for p in packages]]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise JsSourceError(f"`{' '.join(command)}` failed (is the npm registry reachable?):\n"
                                f"{result.stderr[-2000:]}")
    still = [p.spec for p in packages if _installed_version(cache, p.name) != p.version]
    if still:
        raise JsSourceError(f"npm did not install {', '.join(still)} into {cache}; remove that folder and retry")
    return cache


def package_license(cache: Path, name: str) -> str | None:
    """The SPDX license of an installed package, from ``package.json`` (``license`` or old ``licenses``)."""
    meta = json.loads((_package_dir(cache, name) / "package.json").read_text(encoding="utf-8"))
    value = meta.get("license")
    if isinstance(value, dict):
        value = value.get("type")
    if value is None and isinstance(meta.get("licenses"), list) and meta["licenses"]:
        value = meta["licenses"][0].get("type")
    return value if isinstance(value, str) else None


class JsParser:
    """acorn in a Node subprocess: ``functions(code)`` lists top-level functions, ``check(code)`` parses.

    Use as a context manager; one process serves every request of a build.
    """

    def __init__(self, cache: Path) -> None:
        node = shutil.which("node")
        if node is None:
            raise JsSourceError("node not found: install Node.js (>= 18) or build with --languages python")
        script = cache / "copy_as_decode_extract.mjs"
        if not script.exists() or script.read_text(encoding="utf-8") != _NODE_SCRIPT:
            script.write_text(_NODE_SCRIPT, encoding="utf-8")
        self._process = subprocess.Popen([node, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True, encoding="utf-8", cwd=cache)

    def _ask(self, request: dict) -> dict:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise JsSourceError("the acorn helper process exited; run `node <cache>/copy_as_decode_extract.mjs` "
                                "to see its error")
        return json.loads(line)

    def check(self, code: str) -> bool:
        return bool(self._ask({"op": "check", "code": code})["ok"])

    def functions(self, code: str) -> list[dict]:
        reply = self._ask({"op": "extract", "code": code})
        return reply.get("functions", []) if reply["ok"] else []

    def close(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            self._process.wait(timeout=30)

    def __enter__(self) -> "JsParser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _looks_minified(text: str) -> bool:
    """Minified or bundled-to-one-line code: long average lines or many very long ones (a data table alone is fine)."""
    lines = text.splitlines() or [""]
    very_long = sum(len(line) > 500 for line in lines)
    return len(text) / len(lines) > 150 or very_long > max(2, len(lines) // 50)


def package_files(cache: Path, package: JsPackage) -> list[Path]:
    root = _package_dir(cache, package.name)
    files: list[Path] = []
    for include in package.include:
        target = root / include
        if include.endswith("/"):
            pattern = "*" if include == "./" else "**/*"
            files.extend(p for p in target.glob(pattern) if p.is_file() and p.suffix in (".js", ".mjs", ".cjs"))
        elif target.is_file():
            files.append(target)
    return sorted({p for p in files if ".min." not in p.name}, key=lambda p: p.relative_to(root).as_posix())


def js_functions(parser: JsParser, cache: Path, packages: tuple[JsPackage, ...] = PACKAGES,
                 report: dict | None = None) -> list[SourceFunction]:
    """Every top-level function of the allowed packages' files that passes the size filter.

    ``report`` (if given) receives per-package license, file and function counts and the skipped packages.
    """
    out: list[SourceFunction] = []
    report = report if report is not None else {}
    for package in packages:
        license_id = package_license(cache, package.name)
        entry = report.setdefault(package.spec, {"license": license_id, "files": 0, "functions": 0,
                                                 "minified_files_skipped": 0})
        if license_id not in ALLOWED_LICENSES:
            entry["skipped"] = f"license {license_id!r} not in the allowed list"
            continue
        root = _package_dir(cache, package.name)
        for path in package_files(cache, package):
            text = path.read_text(encoding="utf-8", errors="replace")
            if _looks_minified(text):
                entry["minified_files_skipped"] += 1
                continue
            entry["files"] += 1
            file_id = f"npm:{package.spec}/{path.relative_to(root).as_posix()}"
            for found in parser.functions(text):
                if found["column"] != 0:
                    continue
                code = text[found["start"]:found["end"]].rstrip() + "\n"
                if size_ok(code):
                    entry["functions"] += 1
                    out.append(SourceFunction(code=code, language="javascript", name=found["name"], file=file_id,
                                              package=package.spec, license=license_id))
    return out
