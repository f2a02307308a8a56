"""``bench predicted``: Predicted Outputs through the OpenAI-compatible endpoint, side by side.

For each corpus case the model's greedy rewrite (the text modes' messages,
:func:`engine.decoding.prompt.text_messages`, stopped at the closing code fence as the text modes stop) is
requested four ways, in a rotating order, after a warm-up:

* ``http-plain``: ``POST /v1/chat/completions`` without a prediction (a ``serve-openai``
  subprocess on loopback, driven by the official ``openai`` client);
* ``http-predicted``: the same request with the region as ``prediction``;
* ``local-plain`` / ``local-predicted``: the same two requests decoded in this process
  (:class:`engine.openai_api.completion.ChatDecode`, prompt rendering included), no HTTP.

Reported per case and overall: the speed-up of the prediction (plain / predicted wall time),
whether all four texts are identical, the prediction tokens accepted / rejected, and the HTTP
overhead: what the server adds around its own decode (its ``x-copy-as-decode-decode-seconds``
header), and the HTTP wall time against the in-process one. Ratios are measured in one run; the
server and this process each use ``--threads`` threads and never decode at once. Prefix reuse
(:mod:`engine.runtime.prefix_cache`) is off on both sides: every request prefills its whole prompt, so
no arm gains from the one before it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from engine.core.choices import never_cancelled
from engine.bench import harness
from engine.bench.harness import command_line, get_engine, machine_info, refuses_server, rotate
from engine.bench.output import report, table_of
from engine.core.errors import ModelLoadError
from engine.core.tokens import encode
from engine.decoding.prompt import PromptParts, text_messages
from engine.decoding.tables import tables_for
from engine.evaluation.corpora import CorpusError, load_corpus
from engine.openai_api.completion import ChatDecode, build_job
from engine.runtime.backends import BackendOptions
from engine.runtime.threads import set_threads

ARMS = ("http-plain", "http-predicted", "local-plain", "local-predicted")
STOP = ("\n```",)  # the rewrite ends at its closing fence, as in the text modes (engine.decoding.prompt.TEXT_FENCE_CLOSE)
DECODE_HEADER = "x-copy-as-decode-decode-seconds"  # engine.openai_api.app.DECODE_HEADER (no FastAPI import here)


def parse_cases(spec: str) -> list[tuple[str, int]]:
    """``"humanevalfix-python=10,canitedit=5"`` -> [(corpus, count), ...]."""
    out = []
    for part in spec.split(","):
        name, _, count = part.strip().partition("=")
        if not name or not count.isdigit() or int(count) < 1:
            raise ValueError(f"--cases {spec!r}: expected CORPUS=N[,CORPUS=N...], e.g. humanevalfix-python=10")
        out.append((name, int(count)))
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(model: str, backend: str, threads: int | None, progress: Callable[[str], None],
          verify: str = "auto") -> Iterator[str]:
    """A ``serve-openai`` subprocess on a free loopback port; yields its base URL (…/v1)."""
    import httpx

    port = _free_port()
    cmd = [sys.executable, "-m", "engine.cli", "serve-openai", "--port", str(port), "--model", model,
           "--backend", backend, "--selector", "none", "--served-name", "bench", "--prefix-cache-tokens", "0",
           "--verify", verify]
    env = dict(os.environ)
    env.pop("COPY_AS_DECODE_SERVER_KEY", None)
    if threads:
        cmd += ["--threads", str(threads)]
        env["OMP_NUM_THREADS"] = str(threads)
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.time() + 600
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"serve-openai exited with {proc.returncode}: {log.read()[-2000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                        break
                if time.time() > deadline:
                    raise RuntimeError("serve-openai did not start within 600 s")
                time.sleep(0.5)
            progress(f"serve-openai ({backend}) at http://127.0.0.1:{port}/v1")
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _messages(case: Any) -> list[dict[str, str]]:

    return text_messages(PromptParts(instruction=case.instruction, region=case.input, language=case.language))


def _http(client: Any, messages: list[dict[str, str]], max_tokens: int, prediction: str | None) -> dict[str, Any]:
    extra = {"prediction": {"type": "content", "content": prediction}} if prediction is not None else {}
    start = time.perf_counter()
    raw = client.chat.completions.with_raw_response.create(model="bench", messages=messages, max_tokens=max_tokens,
                                                           stop=list(STOP), **extra)
    r = raw.parse()
    wall = time.perf_counter() - start
    details = r.usage.completion_tokens_details
    return {"wall_s": wall, "server_decode_s": float(raw.headers[DECODE_HEADER]),
            "text": r.choices[0].message.content, "finish": r.choices[0].finish_reason,
            "completion_tokens": r.usage.completion_tokens, "accepted": details.accepted_prediction_tokens,
            "rejected": details.rejected_prediction_tokens}


def _local(loaded: Any, messages: list[dict[str, str]], max_tokens: int, prediction: str | None,
           verify: str = "auto") -> dict[str, Any]:

    start = time.perf_counter()
    job = build_job(loaded, messages, max_tokens, STOP, 0.0, 1.0, None, prediction, verify)
    decode = ChatDecode(loaded, tables_for(loaded), job, never_cancelled)
    text = "".join(decode.deltas())
    wall = time.perf_counter() - start
    ids = list(decode._decode.out) if decode._decode is not None else []
    return {"wall_s": wall, "text": text, "finish": decode.finish_reason,
            "completion_tokens": decode.completion_tokens, "accepted": decode.accepted, "rejected": decode.rejected,
            "ids": ids, "prompt_ids": job.prompt_ids}


def measure_predicted(loaded: Any, base_url: str, cases: Sequence[Any], max_new_tokens: int | None,
                      progress: Callable[[str], None], verify: str = "auto") -> dict[str, Any]:
    """Every arm on every case (see the module docstring); ``loaded`` decodes the local arms."""
    import openai


    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=1800)
    warm = _messages(cases[0])
    for prediction in (None, cases[0].input):
        _http(client, warm, 16, prediction)
        _local(loaded, warm, 16, prediction, verify)
    rows = []
    for k, case in enumerate(cases):
        messages = _messages(case)
        limit = max_new_tokens or int(1.5 * len(encode(loaded.tokenizer, case.input))) + 64
        runs: dict[str, dict[str, Any]] = {}
        for arm in rotate(ARMS, k):
            prediction = case.input if arm.endswith("predicted") else None
            runs[arm] = (_http(client, messages, limit, prediction) if arm.startswith("http")
                         else _local(loaded, messages, limit, prediction, verify))
        local_plain, local_predicted = runs["local-plain"], runs["local-predicted"]
        prompt_ids, ar_ids, other_ids = local_plain.pop("prompt_ids"), local_plain.pop("ids"), local_predicted.pop("ids")
        local_predicted.pop("prompt_ids")
        difference = (harness.first_difference(loaded, prompt_ids, ar_ids, other_ids)
                      if local_predicted["text"] != local_plain["text"] else None)
        texts = {r["text"] for r in runs.values()}
        plain, predicted = runs["http-plain"], runs["http-predicted"]
        row = {"id": case.id, "corpus": case.corpus, "max_tokens": limit,
               "identical": len(texts) == 1, "same_as_ar": local_predicted["text"] == local_plain["text"],
               "first_difference": difference, "speedup": plain["wall_s"] / predicted["wall_s"],
               "local_speedup": runs["local-plain"]["wall_s"] / runs["local-predicted"]["wall_s"],
               "overhead_plain": plain["wall_s"] / runs["local-plain"]["wall_s"] - 1,
               "overhead_predicted": predicted["wall_s"] / runs["local-predicted"]["wall_s"] - 1,
               "http_layer": http_layer([plain, predicted]),
               "completion_tokens": predicted["completion_tokens"], "accepted": predicted["accepted"],
               "rejected": predicted["rejected"], "finish": predicted["finish"],
               "counts_match_local": all(predicted[f] == runs["local-predicted"][f]
                                         for f in ("completion_tokens", "accepted", "rejected")),
               "arms": {arm: {f: v for f, v in r.items() if f != "text"} for arm, r in runs.items()}}
        rows.append(row)
        progress(f"{case.id}: {row['speedup']:.2f}x with the prediction, accepted {row['accepted']} / rejected "
                 f"{row['rejected']} of {row['completion_tokens']} tokens, identical {row['identical']}, "
                 f"HTTP layer {100 * row['http_layer']:.1f}% of the server's decode, "
                 f"vs in-process {100 * row['overhead_predicted']:+.1f}% / {100 * row['overhead_plain']:+.1f}%")
    return {"cases": rows, "summary": summarize(rows)}


def http_layer(runs: Sequence[dict[str, Any]]) -> float:
    """What the server adds around its decode (prompt rendering, queue, HTTP, JSON, the client),
    as a share of the decode time the server measured for the same requests."""
    decode = sum(r["server_decode_s"] for r in runs)
    return (sum(r["wall_s"] for r in runs) - decode) / decode


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for corpus in sorted({r["corpus"] for r in rows}) + ["all"]:
        part = [r for r in rows if corpus in ("all", r["corpus"])]
        wall = {a: sum(r["arms"][a]["wall_s"] for r in part) for a in ARMS}
        out[corpus] = {
            "cases": len(part),
            "identical": sum(r["identical"] for r in part),
            "same_as_ar": sum(r["same_as_ar"] for r in part),
            "first_difference_gaps": [round(r["first_difference"]["gap"], 4) for r in part
                                      if r["first_difference"] is not None],
            "speedup_total": wall["http-plain"] / wall["http-predicted"],
            "speedup_median": statistics.median(r["speedup"] for r in part),
            "local_speedup_total": wall["local-plain"] / wall["local-predicted"],
            "overhead_plain_total": wall["http-plain"] / wall["local-plain"] - 1,
            "overhead_predicted_total": wall["http-predicted"] / wall["local-predicted"] - 1,
            "overhead_median": statistics.median(r["overhead_predicted"] for r in part),
            "http_layer": http_layer([r["arms"][a] for r in part for a in ("http-plain", "http-predicted")]),
            "accepted": sum(r["accepted"] for r in part), "rejected": sum(r["rejected"] for r in part),
            "completion_tokens": sum(r["completion_tokens"] for r in part),
            "counts_match_local": all(r["counts_match_local"] for r in part),
        }
    return out


def table_rows(data: dict[str, Any]) -> list[list[str]]:
    rows = []
    for corpus, s in data["summary"].items():
        rows.append([corpus, str(s["cases"]), f"{s['speedup_total']:.2f}x", f"{s['speedup_median']:.2f}x",
                     f"{s['local_speedup_total']:.2f}x", f"{s['accepted']}/{s['rejected']}",
                     f"{s['identical']}/{s['cases']}", f"{100 * s['http_layer']:.1f}%",
                     f"{100 * s['overhead_predicted_total']:+.1f}%", f"{100 * s['overhead_plain_total']:+.1f}%"])
    return rows


TABLE_COLUMNS = ("corpus", "cases", "speed-up", "median", "in-proc.", "acc/rej", "same", "HTTP layer",
                 "vs local pred.", "vs local plain")


def run(args: Any) -> int:
    """The ``bench predicted`` command (arguments in engine/commands/bench.py)."""
    from rich.console import Console

    console = Console(stderr=True)

    def progress(message: str) -> None:
        console.print(f"[dim]{message}[/dim]")

    set_threads(args.threads)
    try:
        cases = [c for name, n in parse_cases(args.cases) for c in load_corpus(name)[:n]]
        engine = get_engine(args.model, progress=progress, selector="none", backend=args.backend,
                            options=BackendOptions(threads=args.threads, prefix_cache_tokens=0))
    except (CorpusError, ModelLoadError, ValueError) as exc:
        print(f"copy-as-decode bench predicted: {exc}", file=sys.stderr)
        return 2
    if refuses_server(engine, "predicted", "the prediction drafts on in-process backends only"):
        return 2
    with serve(args.model, args.backend, args.threads, progress, args.verify) as url:
        data = measure_predicted(engine.loaded, url, cases, args.max_new_tokens, progress, args.verify)
    data.update({"model": args.model, "prefix_cache_tokens": 0, "verify": args.verify, "backend": engine.loaded.runtime.describe(),
                 "machine": machine_info(engine.loaded.device, engine.loaded.dtype), "command": command_line()})
    report(console, table_of(f"predicted outputs over HTTP, {data['backend']}", TABLE_COLUMNS, table_rows(data)),
           data, args.json)
    return 0
