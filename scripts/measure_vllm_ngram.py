"""Speculative mode against ar through the engine on two vLLM CPU servers: one plain, one started
with the server's own n-gram speculation (``--speculative-config``).

On vLLM the engine's speculative mode sends exactly the request ar sends (one streamed greedy
completion, engine/decoding/remote_decode.py); drafting there is the server's setting. This starts
both servers on loopback from the vLLM venv (scripts/vllm-venv.sh) as the tests do
(engine.bench.local_vllm: the embedded model's folder in fp32, the span selector as a LoRA module),
the second one with ``NGRAM_CONFIG`` added, waits for both, then for each of the first N
HumanEvalFix-Python cases (cursor on the bug: the first changed line) runs the edit in modes ar and
speculative through each server, the server order and the mode order alternating per case so the
machine's load falls on both alike.

vLLM refuses ``logit_bias`` on a server with speculative decoding ("The min_p and logit_bias
sampling parameters are not yet supported with speculative decoding"), and every engine request
carries one (the special tokens it excludes); the engine then sends its requests to that server
without it (engine.runtime.backends.vllm, SPECULATIVE_REFUSAL), and still rejects any special
token the server returns. The script first records what the n-gram server answers to the
engine's own ar, speculative and program requests, then times the text modes as the engine sends
them. Per case: wall seconds, completion tokens, outputs identical
across the servers (and ar == speculative on each), and the n-gram server's spec-decode counters
(/metrics, read before and after each request). Both servers are killed at the end, or on error.

    nice -n 5 OMP_NUM_THREADS=1 .venv/bin/python scripts/measure_vllm_ngram.py --limit 8 \
        --json results/backends/vllm_ngram.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.api import EditRequest, Engine  # noqa: E402
from engine.bench import local_vllm  # noqa: E402
from engine.evaluation.corpora import load_corpus  # noqa: E402
from engine.runtime.backends import BackendOptions  # noqa: E402
from engine.runtime.backends.http_client import RemoteError  # noqa: E402
from engine.training.synth.edits import first_changed_line  # noqa: E402

NGRAM_CONFIG = '{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'
SERVERS = ("plain", "ngram")
MODES = ("ar", "speculative")
SPEC_COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
READY_TIMEOUT_S = 1500


def spec_counters(url: str) -> dict[str, float]:
    """The server's spec-decode counters (summed over labels); empty when it exposes none."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode("utf-8", errors="replace")
    out: dict[str, float] = {}
    for name in SPEC_COUNTERS:
        values = re.findall(rf"^vllm:spec_decode_{name}_total(?:{{[^}}]*}})? ([0-9.eE+-]+)$", text, flags=re.M)
        if values:
            out[name] = sum(float(v) for v in values)
    return out


def _ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--venv", type=Path, default=Path(os.environ.get("COPY_AS_DECODE_VLLM_VENV",
                                                                      ROOT / ".venv-vllm")))
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/vllm-ngram"))
    args = parser.parse_args(argv)
    command = "nice -n 5 OMP_NUM_THREADS=1 python scripts/measure_vllm_ngram.py " + " ".join(argv or sys.argv[1:])
    venv_python = args.venv / "bin" / "python"
    if not venv_python.is_file():
        sys.exit(f"no vLLM venv at {args.venv} (scripts/vllm-venv.sh makes it)")
    args.log_dir.mkdir(parents=True, exist_ok=True)
    servers: list[local_vllm.LocalServer] = []
    out: dict[str, Any] = {"command": command, "speculative_config": NGRAM_CONFIG}
    try:
        servers.append(local_vllm.start("plain", venv_python, args.log_dir))
        servers.append(local_vllm.start("ngram", venv_python, args.log_dir, ["--speculative-config", NGRAM_CONFIG]))
        out["flags"] = {s.name: s.flags for s in servers}
        try:
            local_vllm.wait_ready(servers, READY_TIMEOUT_S)
        except local_vllm.ServerFailed as failed:
            out["error"] = {"server": failed.name, "returncode": failed.returncode, "log_tail": failed.tail}
            print(str(failed), flush=True)
            _write(args.json, out)
            return 1
        out["ready_s"] = {s.name: s.ready_s for s in servers}
        urls = {s.name: s.url for s in servers}
        engines = {name: Engine.load("default", backend="vllm", options=BackendOptions(server_url=url))
                   for name, url in urls.items()}
        out["engine_requests_on_ngram_server"] = probe_refusals(engines["ngram"])
        out["records"] = records = run_cases(engines, urls, args.offset, args.limit)
        out["summary"] = summarize(records)
        print(json.dumps(out["summary"], indent=1), flush=True)
    finally:
        local_vllm.stop(servers)
    _write(args.json, out)
    return 0


def probe_refusals(engine: Engine) -> dict[str, str]:
    """What the n-gram server answers to the engine's own requests, per mode (the first case):
    "ok", or the error verbatim."""
    case = load_corpus("humanevalfix-python")[0]
    answers = {}
    for mode in ("ar", "speculative", "program"):
        try:
            engine.edit(EditRequest(case.input, case.instruction, mode=mode, language="python",
                                    focus_line=first_changed_line(case.input, case.gold), max_new_tokens=8))
            answers[mode] = "ok"
        except RemoteError as exc:
            answers[mode] = str(exc)
        print(f"engine's {mode} request on the n-gram server: {answers[mode]}", flush=True)
    return answers


def run_cases(engines: dict[str, Engine], urls: dict[str, str], offset: int, limit: int) -> list[dict[str, Any]]:
    records = []
    for i, case in enumerate(load_corpus("humanevalfix-python")[offset:offset + limit]):
        focus = first_changed_line(case.input, case.gold)
        record: dict[str, Any] = {"id": case.id, "focus_line": focus}
        outputs: dict[tuple[str, str], str] = {}
        servers = SERVERS if i % 2 == 0 else SERVERS[::-1]
        modes = MODES if (i // 2) % 2 == 0 else MODES[::-1]
        for server in servers:
            for mode in modes:
                engine = engines[server]
                engine.forget_prompts()
                request = EditRequest(case.input, case.instruction, mode=mode, focus_line=focus, language="python")
                before = spec_counters(urls[server])
                start = time.perf_counter()
                result = engine.edit(request)
                seconds = time.perf_counter() - start
                time.sleep(0.2)  # let the server's counters settle before reading them
                after = spec_counters(urls[server])
                outputs[(server, mode)] = result.output_text
                record[f"{server}/{mode}"] = {
                    "seconds": round(seconds, 4), "completion_tokens": result.tokens.generated,
                    "stop": result.stop_reason,
                    "spec_decode": {k: after[k] - before.get(k, 0.0) for k in after}}
        for mode in MODES:
            record[f"identical_across_servers/{mode}"] = outputs[("plain", mode)] == outputs[("ngram", mode)]
            record[f"plain_over_ngram/{mode}"] = _ratio(record[f"plain/{mode}"]["seconds"],
                                                        record[f"ngram/{mode}"]["seconds"])
        for server in SERVERS:
            record[f"ar_equals_speculative/{server}"] = outputs[(server, "ar")] == outputs[(server, "speculative")]
        print(case.id, {k: v for k, v in record.items() if "/" in k and not isinstance(v, dict)},
              record["ngram/speculative"]["spec_decode"], flush=True)
        records.append(record)
    return records


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {"cases": len(records)}
    for mode in MODES:
        plain = sum(r[f"plain/{mode}"]["seconds"] for r in records)
        ngram = sum(r[f"ngram/{mode}"]["seconds"] for r in records)
        summary[mode] = {"median_plain_over_ngram": round(statistics.median(r[f"plain_over_ngram/{mode}"]
                                                                            for r in records), 3),
                         "total_plain_over_ngram": _ratio(plain, ngram),
                         "identical_across_servers": sum(r[f"identical_across_servers/{mode}"] for r in records)}
    for server in SERVERS:
        summary[f"ar_equals_speculative/{server}"] = sum(r[f"ar_equals_speculative/{server}"] for r in records)
        summary[f"median_speculative_over_ar_time/{server}"] = round(statistics.median(
            r[f"{server}/speculative"]["seconds"] / r[f"{server}/ar"]["seconds"] for r in records), 3)
    totals: dict[str, float] = {}
    for r in records:
        for mode in MODES:
            for k, v in r[f"ngram/{mode}"]["spec_decode"].items():
                totals[k] = totals.get(k, 0.0) + v
    summary["ngram_spec_decode"] = totals
    if totals.get("num_draft_tokens"):
        summary["ngram_acceptance_rate"] = round(totals["num_accepted_tokens"] / totals["num_draft_tokens"], 3)
    summary["completion_tokens"] = sum(r["ngram/ar"]["completion_tokens"] for r in records)
    return summary


def _write(path: Path | None, out: dict[str, Any]) -> None:
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
