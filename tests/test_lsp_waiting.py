"""The server's timed wait (lsp_server.waiting.within) never loses its caller's cancel, which
Python 3.11's ``asyncio.wait_for`` does when the awaited work completes in the same loop iteration
as the cancel: an edit whose client left would then run to its end."""

from __future__ import annotations

import asyncio

import pytest

from lsp_server.waiting import within


async def _cancel_as_it_completes(wait) -> str:
    """Cancel a task waiting on an event at the moment the event is set; what the task saw."""
    event = asyncio.Event()

    async def waiter() -> str:
        await wait(event.wait(), 5)
        await asyncio.sleep(0)  # a cancel that was not lost lands here at the latest
        return "ran on"

    task = asyncio.ensure_future(waiter())
    await asyncio.sleep(0.01)  # the task now waits on the event
    event.set()
    task.cancel()
    try:
        return await task
    except asyncio.CancelledError:
        return "cancelled"


async def test_a_cancel_as_the_wait_completes_is_not_lost():
    assert await _cancel_as_it_completes(within) == "cancelled"


async def test_the_race_is_real_for_the_wait_it_replaces():
    """The same race with ``asyncio.wait_for``: on Python 3.11 the cancel is lost (fixed in 3.12)."""
    import sys

    seen = await _cancel_as_it_completes(asyncio.wait_for)
    assert seen == ("ran on" if sys.version_info < (3, 12) else "cancelled")


async def test_the_wait_gives_the_result_or_times_out():
    async def value() -> int:
        return 7

    assert await within(value(), 1) == 7
    with pytest.raises(asyncio.TimeoutError):
        await within(asyncio.sleep(1), 0.01)


async def test_a_failure_of_the_awaited_work_is_raised():
    async def fails() -> None:
        raise ValueError("the client answered with an error")

    with pytest.raises(ValueError, match="client answered"):
        await within(fails(), 1)
