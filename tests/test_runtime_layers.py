"""The runtime's layers: where a model comes from (engine.runtime.sources), the loaded model and
its runtime (engine.runtime.loaded), the registry of backends (engine.runtime.load), the protocol
a runtime keeps (engine.runtime.protocol), and vLLM's span selector: the served LoRA module of the
adapter folder asked for, asked of the server once per folder."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from engine.core.choices import BACKENDS
from engine.runtime import protocol
from engine.runtime.backends import resolve_backend
from engine.runtime.load import IN_PROCESS_BACKENDS, REGISTRY
from engine.runtime.loaded import LoadedModel, LoadRequest


def test_every_backend_is_registered_and_in_process_ones_are_backends_that_run_here():
    assert set(REGISTRY) == set(BACKENDS) - {"auto"}
    assert "auto" not in IN_PROCESS_BACKENDS and set(IN_PROCESS_BACKENDS) == {"transformers", "llamacpp"}
    for gguf in (None, Path("model.gguf")):  # auto always picks one that runs in this process
        assert resolve_backend("auto", "default", gguf) in IN_PROCESS_BACKENDS


def test_bench_predicted_takes_auto_and_the_in_process_backends_only():
    from engine.cli import build_parser

    parser = build_parser(["bench"])
    for backend in ("auto", *IN_PROCESS_BACKENDS):
        assert parser.parse_args(["bench", "predicted", "--backend", backend]).backend == backend
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "predicted", "--backend", "vllm"])


def test_each_registered_backend_declares_a_loader_of_a_load_request():
    for name, entry in REGISTRY.items():
        loader = entry.loader()
        assert loader.__module__ == entry.module and loader.__name__ == "load", name
        assert list(inspect.signature(loader).parameters) == ["request"], name


def test_a_loaded_model_has_a_runtime():
    with pytest.raises(TypeError, match="runtime"):
        LoadedModel("tiny", None, None, "cpu", "float32")  # type: ignore[call-arg]
    assert LoadRequest().name == "default" and LoadRequest().options.context_size > 0


def test_the_runtime_protocol_names_no_any():
    tree = ast.parse(Path(protocol.__file__).read_text(encoding="utf-8"))
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert "Any" not in names


# -- vLLM: the selector's served LoRA module --------------------------------------------------------


class _Client:
    """The part of the HTTP client with_selector reads: ``/v1/models``, counted."""

    display = "http://server:8000"

    def __init__(self, cards: list[dict]):
        self.cards, self.asked = cards, 0

    def get_json(self, path: str) -> dict:
        assert path == "/v1/models"
        self.asked += 1
        return {"data": self.cards}


SPAN = Path("engine/runtime/selector/smollm2-135m").resolve()
APPLY = Path("engine/runtime/selector/smollm2-135m-apply").resolve()


def _base(cards: list[dict]):
    from engine.runtime.backends.vllm import VllmRuntime

    client = _Client([{"id": "base", "max_model_len": 2048}, *cards])
    runtime = VllmRuntime(client, "base", tokenizer=[0] * 10, max_model_len=2048)  # type: ignore[arg-type]
    return client, LoadedModel("default", None, None, "remote", "remote", runtime)


def test_vllm_gives_the_lora_module_of_the_folder_asked_for():
    client, loaded = _base([{"id": "selector", "parent": "base", "root": str(SPAN)},
                            {"id": "apply", "parent": "base", "root": str(APPLY)}])
    span = loaded.runtime.with_selector(loaded, SPAN, None)
    apply = loaded.runtime.with_selector(loaded, APPLY, None)
    assert span is not None and span.runtime.request_model == "selector" and span.selector == str(SPAN)
    assert apply is not None and apply.runtime.request_model == "apply" and apply.selector == str(APPLY)


def test_vllm_matches_a_folder_the_server_sees_under_another_path_by_its_name():
    client, loaded = _base([{"id": "mine", "parent": "base", "root": "/models/smollm2-135m-apply"},
                            {"id": "other-base", "parent": "other", "root": str(SPAN)}])
    found = loaded.runtime.with_selector(loaded, APPLY, None)
    assert found is not None and found.runtime.request_model == "mine"
    assert loaded.runtime.with_selector(loaded, SPAN, None) is None  # served, but on another base model


def test_vllm_asks_the_server_once_per_folder_a_missing_selector_included():
    client, loaded = _base([{"id": "selector", "parent": "base", "root": str(SPAN)}])
    assert loaded.runtime.with_selector(loaded, APPLY, None) is None
    assert loaded.runtime.with_selector(loaded, APPLY, None) is None
    assert client.asked == 1
    first = loaded.runtime.with_selector(loaded, SPAN, None)
    assert loaded.runtime.with_selector(loaded, SPAN, None) is first and client.asked == 2


def test_vllm_serves_its_base_model_beside_lora_modules_of_any_name(tokenizer):
    from fake_completions_server import FakeCompletionsServer

    from engine.runtime.backends import BackendOptions
    from engine.runtime.load import load_model

    with FakeCompletionsServer(tokenizer, loras={"apply": str(APPLY), "selector": str(SPAN)}) as server:
        loaded = load_model("default", backend="vllm", options=BackendOptions(server_url=server.url))
        assert loaded.runtime.request_model == "fake-model"
        apply = loaded.runtime.with_selector(loaded, APPLY, None)
        assert apply is not None and apply.runtime.request_model == "apply"
