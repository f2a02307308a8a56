"""A cancel ends a request that waits: for the edit slot (another edit runs) or for its model's
load. The wait returns at once; the slot is not taken behind the caller's back, and a load goes
on to land in the pool for the next request. The idle buffer's warm-up (lsp_server/warmup.py) waits
for its delay, restarts on a keystroke, starts no new read while an AI fix is on its way and
never loads a model."""

from __future__ import annotations

import asyncio

import pytest

from lsp_server.models import unless_stopped


async def test_a_cancel_while_queued_leaves_the_queue_at_once():
    slot, stopped = asyncio.Lock(), asyncio.Event()
    await slot.acquire()  # another edit runs
    waiting = asyncio.ensure_future(unless_stopped(slot.acquire(), stopped, abandon=True))
    await asyncio.sleep(0)
    assert not waiting.done()
    stopped.set()
    assert await asyncio.wait_for(waiting, 1) == (False, None)
    slot.release()
    await asyncio.sleep(0)
    assert not slot.locked()  # the abandoned wait did not take the slot


async def test_a_cancel_while_the_model_loads_leaves_the_load_running():
    stopped, loaded = asyncio.Event(), asyncio.Event()

    async def load() -> str:
        await loaded.wait()
        return "engine"

    work = asyncio.ensure_future(load())
    waiting = asyncio.ensure_future(unless_stopped(work, stopped))
    await asyncio.sleep(0)
    stopped.set()
    assert await asyncio.wait_for(waiting, 1) == (False, None)
    loaded.set()
    assert await work == "engine"  # the load finished for whoever asks next


async def test_work_done_first_counts_and_its_error_is_raised():
    stopped = asyncio.Event()
    assert await unless_stopped(asyncio.sleep(0, "x"), stopped) == (True, "x")

    async def fails() -> None:
        raise RuntimeError("no model")

    with pytest.raises(RuntimeError, match="no model"):
        await unless_stopped(fails(), stopped)


def _services_with(tmp_path, settings: dict, text: str = "def f(x):\n    return x\n"):
    """The server's services with a fake client port (no server), one document open."""
    from fake_client import FakeClient
    from lsprotocol import types

    from lsp_server.documents import DocumentStore
    from lsp_server.models import ModelPool
    from lsp_server.services import EditServices
    from lsp_server.workspace_config import WorkspaceConfig

    config = WorkspaceConfig()
    config.set_user({"copyAsDecode": settings})
    services = EditServices.build(FakeClient(), config, ModelPool(), DocumentStore(), "utf-16")
    uri = (tmp_path / "a.py").as_uri()
    services.documents.open(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    return services, uri


async def test_an_idle_buffer_is_read_only_once_a_model_is_loaded(tmp_path):
    """The warm-up never loads a model (the server loads none before the first edit)."""
    services, uri = _services_with(tmp_path, {"warmUpDelayMs": 100})
    services.warmups.touched(uri)
    assert services.warmups.timer is not None
    await asyncio.sleep(0.4)
    assert services.warmups.timer is None and services.warmups.running is None
    assert services.warmups.done == [] and services.models.names() == []


async def test_no_warm_up_timer_when_it_is_off_and_a_keystroke_restarts_it(tmp_path):
    services, uri = _services_with(tmp_path, {"warmUp": "off"})
    services.warmups.touched(uri)
    assert services.warmups.timer is None
    services, uri = _services_with(tmp_path, {"warmUpDelayMs": 30000})
    services.warmups.touched(uri)
    first = services.warmups.timer
    services.warmups.touched(uri)  # a keystroke: the idle time starts again
    assert first is not None and first.cancelled() and services.warmups.timer is not first
    services.warmups.edit_began()  # an AI fix: no read starts while it is on its way
    assert services.warmups.timer is None
    services.warmups.edit_ended(uri)  # the buffer it left is read once idle again
    assert services.warmups.timer is not None
    services.warmups.stop()  # a settings change
    assert services.warmups.timer is None
