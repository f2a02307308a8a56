"""The vLLM backend against a real vLLM server (tests/vllm_server.py: its own venv, loopback,
the embedded model's fp32 weights): program, speculative and ar edits give exactly what the
in-process transformers engine gives for the same request (greedy, same weights), a copy is a
prefix-cache hit on the server, concurrent edits run side by side, and an "AI fix" from a real
LSP client goes through it. The failure paths are in tests/test_vllm_faults.py."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from engine.api import EditRequest, Engine
from engine.evaluation.corpora import load_corpus
from engine.runtime.backends import BackendOptions

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.vllm, pytest.mark.timeout(1200)]

BUGGY = 'def add(a, b):\n    """Return the sum of a and b."""\n    return a - b\n\n\nprint(add(1, 2))\n'


@pytest.fixture(scope="module")
def remote(vllm_server_url: str) -> Engine:
    engine = Engine.load("default", backend="vllm", options=BackendOptions(server_url=vllm_server_url))
    assert engine.model_for("program").runtime.request_model == "selector"  # the served LoRA module
    return engine


@pytest.fixture(scope="module")
def local() -> Engine:
    return Engine.load("default", backend="transformers")


@pytest.fixture(scope="module")
def local_base() -> Engine:
    return Engine.load("default", backend="transformers", selector="none")


def _cases() -> list[tuple[str, str, str]]:
    corpus = load_corpus("humanevalfix-python")
    return [("buggy", BUGGY, "Fix the bug in add.")] + [(c.id, c.input, c.instruction) for c in (corpus[0], corpus[2])]


@pytest.mark.parametrize("mode", ["program", "speculative", "ar"])
def test_edits_match_the_in_process_engine(remote: Engine, local: Engine, mode: str):
    """Program mode: the span selector on both sides (a vLLM LoRA module vs the merged adapter),
    greedy on both: the deviation from a gen that writes the hinted line back unchanged
    (engine/decoding/noop_gen.py) is not on vLLM yet (README, "vLLM"), so it is off in-process here; the
    localizer's hint is on both sides."""
    for name, text, instruction in _cases():
        request = dict(text=text, instruction=instruction, mode=mode, max_new_tokens=64, language="python",
                       noop_deviation=False)
        theirs, ours = remote.edit(EditRequest(**request)), local.edit(EditRequest(**request))
        assert theirs.raw_output == ours.raw_output, f"{name}: vLLM and in-process differ"
        assert theirs.output_text == ours.output_text and theirs.stop_reason == ours.stop_reason
        if mode == "program":
            assert theirs.program == ours.program
            assert theirs.tokens.copied == ours.tokens.copied  # the same splices, sent as prompt tokens


def test_copies_are_prefix_cache_hits(remote: Engine):
    runtime = remote.loaded.runtime
    before = runtime.prefix_cache()
    result = remote.edit(EditRequest(BUGGY, "Fix the bug in add.", mode="program", max_new_tokens=64))
    after = runtime.prefix_cache()
    requests = result.breakdown["requests"]
    queried = after["prefix_cache_queries_total"] - before["prefix_cache_queries_total"]
    hits = after["prefix_cache_hits_total"] - before["prefix_cache_hits_total"]
    assert requests >= 2 and result.tokens.copied > 0
    # Every request after the first re-reads the one before it from the cache, except the last
    # partial block (block size 32) of what the previous request had.
    assert queried - hits <= requests * 2 * 32 + result.prompt_tokens, (queried, hits, requests)
    assert hits >= (requests - 1) * (result.prompt_tokens - 32)


def test_a_warm_up_leaves_the_fix_only_its_program_requests(remote: Engine, local: Engine):
    """An idle buffer's warm-up on a server: the localizer's request and the fix's first prompt
    go ahead (the server keeps the prompt, the client the surprise), so the fix sends no
    localizer request (every prompt token it sends is a prefix-cache query; the localizer's
    prompt_logprobs request is not one) and writes what the in-process engine writes."""
    text = "# read while idle\n" + BUGGY
    request = EditRequest(text, "Fix the bug in add.", mode="program", max_new_tokens=64, focus_line=4,
                          language="python", noop_deviation=False)
    assert remote.read_ahead(request).status == "done"  # on a server: the prompt only
    runtime = remote.loaded.runtime
    before = runtime.prefix_cache()
    result = remote.edit(request)
    after = runtime.prefix_cache()
    sent = after["prompt_tokens_total"] - before["prompt_tokens_total"]
    assert sent == after["prefix_cache_queries_total"] - before["prefix_cache_queries_total"] > 0
    assert result.raw_output == local.edit(request).raw_output


def test_concurrent_edits_run_side_by_side(remote: Engine):
    texts = [BUGGY.replace("add", f"add{i}") for i in range(3)]
    sequential = [remote.edit(EditRequest(t, "Fix the bug.", mode="ar", max_new_tokens=48)).output_text for t in texts]
    results: dict[int, str] = {}

    def run(i: int) -> None:
        results[i] = remote.edit(EditRequest(texts[i], "Fix the bug.", mode="ar", max_new_tokens=48)).output_text

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert [results[i] for i in range(3)] == sequential


def test_cli_edit_through_vllm(vllm_server_url: str, local: Engine, tmp_path: Path):
    import subprocess

    path = tmp_path / "buggy.py"
    path.write_text(BUGGY)
    run = subprocess.run([sys.executable, "-m", "engine.cli", "edit", str(path), "-i", "Fix the bug in add.",
                          "--mode", "program", "--focus", "3", "--backend", "vllm", "--server-url", vllm_server_url,
                          "--max-new-tokens", "64", "--output", str(tmp_path / "out.py")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    want = local.edit(EditRequest(BUGGY, "Fix the bug in add.", mode="program", focus_line=3, max_new_tokens=64,
                                  language="python"))
    assert (tmp_path / "out.py").read_text() == want.output_text


# --- the language server with a remote backend ---------------------------------------------------

import pytest_lsp  # noqa: E402
from lsprotocol import types  # noqa: E402
from pytest_lsp import LanguageClient, client_capabilities  # noqa: E402
from test_lsp_server import SERVER, _attach_editor, execute, expected, uri_of  # noqa: E402


@pytest_lsp.fixture(config=SERVER)
async def lsp_client_vllm(lsp_client: LanguageClient, vllm_server_url: str, tmp_path: Path):
    _attach_editor(lsp_client, "visual-studio-code")
    (tmp_path / ".copy-as-decode.toml").write_text('mode = "ar"\nmax_new_tokens = 64\nbackend = "vllm"\n'
                                                   'selector = "none"\n')
    lsp_client.set_configuration({"copyAsDecode": {}})
    lsp_client.workspace_root = tmp_path  # type: ignore[attr-defined]
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=tmp_path.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=tmp_path.as_uri(), name="ws")],
        # the server URL is a user-level setting (initializationOptions), never a workspace file's
        initialization_options={"copyAsDecode": {"serverUrl": vllm_server_url}},
    ))
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_ai_fix_through_vllm(lsp_client_vllm: LanguageClient, local_base: Engine):
    lsp_client = lsp_client_vllm
    workspace: Path = lsp_client.workspace_root  # type: ignore[attr-defined]
    uri = uri_of(workspace, "fix.py", BUGGY)
    lsp_client.editor.open(uri, BUGGY)  # type: ignore[attr-defined]
    outcome = await execute(lsp_client, {"uri": uri, "range": None, "instruction": "Fix the bug in add.",
                                         "kind": "fix"})
    assert outcome["status"] in ("done", "unchanged"), outcome
    want, _result, _events = expected(local_base, BUGGY, "Fix the bug in add.", mode="ar", max_new_tokens=64,
                                      context_lines=20)  # the request the server builds, run in-process
    assert lsp_client.editor.text(uri) == want  # type: ignore[attr-defined]
