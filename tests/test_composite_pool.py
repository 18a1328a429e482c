"""math-verify in the pool: an input that runs past the limit is counted `timeout` at the limit (within
a few seconds on a loaded machine, not the minutes it would run), its worker is replaced (and its process is
gone), and another call is answered meanwhile, while the first still hangs (the issue's measured case:
math-verify alone takes 5 s and returns False). A replacement that fails to start leaves the pool usable; close() during a check gives the
caller PoolClosed; workers that cannot import math-verify fail every call loudly (issue 41 #3, #4)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from helpers.ci import need
from rmspec.composite.mathpool import MathPool, PoolClosed, WorkerStartError

need("math_verify")
HANG = ("$1$", "\\boxed{9^{9^{9^{9^{9}}}}}")  # math-verify: "Timeout during comparison" after 5 s, False


def test_timeout_is_counted_and_other_calls_go_on():
    limit = 3.0  # room on a loaded machine: the other call must end while the hanging one still runs
    pool = MathPool(workers=2, limit_s=limit)
    try:
        # both workers started and warm (their start-up is never charged to a call)
        warm = pool.check_many([("$2$", "$2$"), ("$3$", "$3$")])
        assert [o.value for o in warm] == [1.0, 1.0]
        result = {}

        def hang() -> None:
            started = time.monotonic()
            result["outcome"] = pool.check(*HANG)
            result["seconds"] = time.monotonic() - started

        thread = threading.Thread(target=hang)
        thread.start()
        time.sleep(0.3)  # the hanging call holds its worker now
        started = time.monotonic()
        other = pool.check("$\\frac{1}{2}$", "$0.5$")
        other_seconds = time.monotonic() - started
        hanging = thread.is_alive()  # the other call did not wait for the hanging one to end
        thread.join(timeout=30)
        assert other.value == 1.0 and hanging and other_seconds < limit, other_seconds
        assert result["outcome"].reason == "timeout", result
        assert result["seconds"] < limit + 3.0, result["seconds"]  # stopped at its limit, not run to the end
        assert pool.replaced == 1
        # the replacement worker answers (after its own start-up)
        assert pool.check("$4$", "$\\boxed{4}$").value == 1.0
    finally:
        pool.close()


def _gone(pid: int) -> bool:
    """The process is dead and reaped (a zombie still answers signal 0)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _hang_in_thread(pool: MathPool) -> tuple[threading.Thread, dict]:
    result: dict = {}

    def hang() -> None:
        try:
            result["outcome"] = pool.check(*HANG)
        except BaseException as exc:  # what the caller is given
            result["error"] = exc

    thread = threading.Thread(target=hang)
    thread.start()
    return thread, result


def test_a_timed_out_worker_is_dead_not_leaked():
    pool = MathPool(workers=1, limit_s=1.5)
    try:
        assert pool.check("$2$", "$2$").value == 1.0
        (hung,) = [w.process.pid for w in pool._all]
        assert pool.check(*HANG).reason == "timeout"
        assert _gone(hung), f"the hung math-verify process {hung} is still there"
        assert hung not in [w.process.pid for w in pool._all]
    finally:
        pool.close()


def test_a_failed_replacement_start_does_not_poison_the_pool(monkeypatch):
    pool = MathPool(workers=1, limit_s=1.5)
    try:
        assert pool.check("$2$", "$2$").value == 1.0
        real_start, calls = pool._start, []

        def fails_once():
            calls.append(1)
            if len(calls) == 1:
                raise OSError("Resource temporarily unavailable (simulated)")
            return real_start()

        monkeypatch.setattr(pool, "_start", fails_once)
        assert pool.check(*HANG).reason == "timeout"  # the replacement's start failed here
        # the system recovered: the next calls start a worker and answer, again and again
        assert pool.check("$4$", "$\\boxed{4}$").value == 1.0
        assert pool.check("$4$", "$\\boxed{5}$").value == 0.0
        assert len(calls) == 2 and len(pool._all) == 1
    finally:
        pool.close()


def test_close_during_a_check_gives_a_clear_result():
    pool = MathPool(workers=1, limit_s=8)
    try:
        assert pool.check("$2$", "$2$").value == 1.0
        thread, result = _hang_in_thread(pool)
        deadline = time.monotonic() + 30
        while not pool._idle.empty() and time.monotonic() < deadline:  # wait until it holds the worker
            time.sleep(0.05)
        time.sleep(0.5)  # and has sent its task
        pids = [w.process.pid for w in pool._all]
        started = time.monotonic()
        pool.close()
        thread.join(timeout=30)
        assert time.monotonic() - started < 5
        assert isinstance(result.get("error"), PoolClosed), result
        assert "closed while this check ran" in str(result["error"])
        assert all(_gone(pid) for pid in pids)
        with pytest.raises(PoolClosed, match="closed"):
            pool.check("$2$", "$2$")
    finally:
        pool.close()


def test_workers_that_cannot_import_math_verify_fail_loudly(tmp_path, monkeypatch):
    """math-verify not importable in the workers (as with `pip install rmspec` without [rules]): the
    call raises naming the extra, every later call too, and no row is counted parse_error."""
    (tmp_path / "math_verify.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'math_verify'\", name='math_verify')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))  # spawned workers start with the parent's sys.path
    pool = MathPool(workers=2, limit_s=5)
    try:
        for _ in range(3):
            with pytest.raises(WorkerStartError) as err:
                pool.check("$2$", "$2$")
            assert "No module named 'math_verify'" in err.value.message
            assert "rmspec[rules]" in err.value.hint
        with pytest.raises(WorkerStartError):
            pool.check_many([("$1$", "$1$")] * 4)
        assert pool.replaced == 0 and len(pool._all) <= 1  # no worker started per call, none counted as a row
    finally:
        pool.close()
