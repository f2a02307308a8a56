"""A cancel ends a request that waits: for the edit slot (another edit runs) or for its model's
load. The wait returns at once; the slot is not taken behind the caller's back, and a load goes
on to land in the pool for the next request."""

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
