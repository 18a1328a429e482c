"""Dynamic batching across concurrent requests.

RL trainers send one sample per request (OpenRLHF does), so one forward pass per request leaves
the hardware idle. Requests put their items in one queue; a single worker takes what is waiting
(up to a token budget, after at most `max_wait` for more to arrive), runs one scoring call in a
dedicated thread, and hands each request its results. While a batch runs, the next one gathers.
`batches_at_once` lets an engine take several batches side by side; both engines take one (for vLLM's
CPU engine several split the same requests into smaller, costlier steps: bench/results/serve_engines.md).

A text's score does not depend on its batch: the engine pads on the right with an attention mask
and sorts by length inside the call, as training and `rmspec eval` do (tested).

The queue is bounded (items waiting): a request that would overflow it is refused at once
(`QueueFull`, answered 503 + Retry-After) instead of waiting behind minutes of work; a request
with more items than the whole queue can never fit (`NeverFits`, answered 413).

A request whose client has gone (the route cancels its `submit`) leaves the queue at once: its
waiting items are dropped, so no later batch computes them; a running batch is computed a forward
pass (`chunk` items) at a time and skips the gone request's items that have not run yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any


class QueueFull(Exception):
    """The queue holds too many items to take this request now; retrying later can succeed."""


class NeverFits(Exception):
    """The request has more items than the queue can ever hold (`max_queue`)."""


@dataclass(eq=False)  # jobs compare by identity (the queue removes one by one)
class _Job:
    items: list[Any]
    future: asyncio.Future
    results: list[Any] = field(default_factory=list)
    done: int = 0  # items handed to batches so far
    finished: int = 0  # items with a result
    enqueued: float = field(default_factory=time.perf_counter)


class Batcher:
    """`await batcher.submit(items)` -> one result per item, computed in shared batches.

    run(items) -> results is the blocking scoring call; cost(item) its token count.
    """

    def __init__(
        self,
        run: Callable[[list[Any]], list[Any]],
        cost: Callable[[Any], int],
        *,
        max_batch_tokens: int = 16384,
        max_batch_items: int = 256,
        max_wait: float = 0.005,
        max_queue: int = 4096,
        on_batch: Callable[[int, int, float], None] | None = None,
        chunk: int = 32,
        batches_at_once: int = 1,
    ):
        self.run, self.cost = run, cost
        self.max_batch_tokens, self.max_batch_items = max_batch_tokens, max_batch_items
        self.max_wait, self.max_queue = max_wait, max_queue
        self.chunk = max(1, chunk)  # items per run() call inside a batch (the engine's forward batch)
        self.on_batch = on_batch  # (items, tokens, seconds) after each batch: metrics
        self._jobs: deque[_Job] = deque()
        self._waiting = 0  # items queued, not yet in a batch
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self.batches_at_once = max(1, batches_at_once)
        self._executor = ThreadPoolExecutor(max_workers=self.batches_at_once, thread_name_prefix="rmspec-batch")
        self._running: set[asyncio.Task] = set()  # batches being computed
        self._slot_free: asyncio.Event | None = None
        self.in_flight = 0  # items in the batches being computed
        self.on_cancel: Callable[[int], None] | None = None  # (items dropped) when a client has gone

    @property
    def depth(self) -> int:
        return self._waiting

    def start(self) -> None:
        self._wakeup, self._slot_free = asyncio.Event(), asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._worker())

    async def stop(self, timeout: float | None = None) -> None:
        """Finish what is queued within `timeout` seconds, then stop (SIGTERM drains in-flight
        requests); what is still queued then fails with QueueFull (503: retry elsewhere)."""
        deadline = None if timeout is None else time.perf_counter() + timeout
        while (self._jobs or self.in_flight) and (deadline is None or time.perf_counter() < deadline):
            await asyncio.sleep(0.01)
        for task in list(self._running):  # past the timeout: the batches still running are abandoned
            task.cancel()
        for job in list(self._jobs):
            if not job.future.done():
                job.future.set_exception(QueueFull("the server is shutting down"))
        self._jobs.clear()
        self._waiting = 0
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._executor.shutdown(wait=True)

    async def submit(self, items: Sequence[Any]) -> list[Any]:
        if not items:
            return []
        if len(items) > self.max_queue:
            raise NeverFits(f"{len(items)} items in one request, more than the queue holds ({self.max_queue})")
        if self._waiting + len(items) > self.max_queue:
            raise QueueFull(f"{self._waiting} items are waiting (limit {self.max_queue})")
        job = _Job(list(items), asyncio.get_running_loop().create_future())
        job.results = [None] * len(items)
        self._jobs.append(job)
        self._waiting += len(items)
        assert self._wakeup is not None, "Batcher.start() was not called"
        self._wakeup.set()
        try:
            return await asyncio.shield(job.future)
        except asyncio.CancelledError:
            self._drop(job)
            raise

    def _drop(self, job: _Job) -> None:
        """A cancelled request: its waiting items leave the queue; results still due are ignored."""
        if not job.future.done():
            job.future.cancel()
        if job in self._jobs:
            left = len(job.items) - job.done
            self._jobs.remove(job)
            self._waiting -= left
            if self.on_cancel is not None and left:
                self.on_cancel(left)

    # ------------------------------------------------------------------ the worker

    def _take(self) -> list[tuple[_Job, int]]:
        """(job, item index) pairs for one batch, oldest first, within the token and item budgets."""
        taken: list[tuple[_Job, int]] = []
        tokens = 0
        while self._jobs and len(taken) < self.max_batch_items:
            job = self._jobs[0]
            cost = self.cost(job.items[job.done])
            if taken and tokens + cost > self.max_batch_tokens:
                break
            taken.append((job, job.done))
            tokens += cost
            job.done += 1
            if job.done == len(job.items):
                self._jobs.popleft()
        self._waiting -= len(taken)
        return taken

    def _queued_tokens(self) -> int:
        return sum(self.cost(item) for job in self._jobs for item in job.items[job.done :])

    async def _run(self, loop: Any, batch: list[tuple[_Job, int]], items: list[Any]) -> tuple[list[Any], list[Any]]:
        """The batch's results, computed `chunk` items at a time, shortest first (as the engine
        sorts them): before each chunk, items whose request was cancelled meanwhile are skipped,
        so a client that went away costs at most one forward pass of the running batch."""
        results: list[Any] = [None] * len(items)
        computed: list[Any] = []
        order = sorted(range(len(items)), key=lambda k: self.cost(items[k]))
        for start in range(0, len(order), self.chunk):
            idx = [k for k in order[start : start + self.chunk] if not batch[k][0].future.done()]
            if not idx:
                continue
            chunk = [items[k] for k in idx]
            for k, value in zip(idx, await loop.run_in_executor(self._executor, self.run, chunk)):
                results[k] = value
            computed += chunk
        return results, computed

    async def _worker(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._wakeup is not None and self._slot_free is not None
        while True:
            while len(self._running) >= self.batches_at_once:
                self._slot_free.clear()
                await self._slot_free.wait()
            if not self._jobs:
                self._wakeup.clear()
                await self._wakeup.wait()
            # A short wait lets concurrent single-sample requests join this batch; skipped when a
            # batch's worth is already queued.
            deadline = self._jobs[0].enqueued + self.max_wait if self._jobs else time.perf_counter()
            while (
                self._waiting < self.max_batch_items
                and time.perf_counter() < deadline
                and self._queued_tokens() < self.max_batch_tokens
            ):
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), max(0.0, deadline - time.perf_counter()))
                except asyncio.TimeoutError:
                    break
            batch = self._take()
            if not batch:
                continue
            self.in_flight += len(batch)  # counted now: stop() must not see the batch neither queued nor running
            self._running.add(loop.create_task(self._compute(loop, batch)))

    async def _compute(self, loop: Any, batch: list[tuple[_Job, int]]) -> None:
        """One batch: computed, then each request handed its results (or the batch's error)."""
        items = [job.items[i] for job, i in batch]
        started = time.perf_counter()
        try:
            results, computed = await self._run(loop, batch, items)
            error = None
        except Exception as exc:  # the batch fails: its requests get the error, the server lives on
            results, computed, error = None, items, exc
        finally:
            self.in_flight -= len(items)
            self._running.discard(asyncio.current_task())
            assert self._slot_free is not None
            self._slot_free.set()  # after the discard: the worker counts the running batches when it wakes
        if self.on_batch is not None and computed:
            self.on_batch(len(computed), sum(self.cost(x) for x in computed), time.perf_counter() - started)
        for k, (job, i) in enumerate(batch):
            if job.future.done():
                continue
            if error is not None:
                job.future.set_exception(error)
                continue
            assert results is not None, "a batch without an error has its results"
            job.results[i] = results[k]
            job.finished += 1
            if job.finished == len(job.items):
                job.future.set_result(job.results)
        # A failed job may still have items queued: drop them.
        if error is not None:
            failed = {id(job) for job, _ in batch}
            for job in [j for j in self._jobs if id(j) in failed]:
                self._waiting -= len(job.items) - job.done
                self._jobs.remove(job)
