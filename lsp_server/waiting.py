"""A wait with a time limit that never swallows its caller's cancel.

Python 3.11's ``asyncio.wait_for`` returns the awaited result when it completes in the same loop
iteration as a cancel of the waiting task, and the cancel is lost (fixed in 3.12). An edit whose
client left (or whose server is shutting down) would then run to its end. :func:`within` is the
server's one timed wait instead: the waiting task's cancel always propagates.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], timeout: float) -> T:
    """``awaitable``'s result, or :class:`asyncio.TimeoutError` after ``timeout`` seconds (the
    awaitable is then cancelled). A cancel of the caller cancels the awaitable and propagates."""
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        raise asyncio.TimeoutError
    return task.result()
