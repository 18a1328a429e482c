"""math-verify in the pool: an input that runs past the limit is counted `timeout` within the
limit plus one second, its worker is replaced, and another call is answered meanwhile in under a
second (the issue's measured case: math-verify alone takes 5 s and returns False)."""

from __future__ import annotations

import threading
import time

from helpers.ci import need
from rmspec.composite.mathpool import MathPool

need("math_verify")
HANG = ("$1$", "\\boxed{9^{9^{9^{9^{9}}}}}")  # math-verify: "Timeout during comparison" after 5 s, False


def test_timeout_is_counted_and_other_calls_go_on():
    limit = 1.5
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
        thread.join(timeout=30)
        assert other.value == 1.0 and other_seconds < 1.0, other_seconds
        assert result["outcome"].reason == "timeout", result
        assert result["seconds"] < limit + 1.0, result["seconds"]
        assert pool.replaced == 1
        # the replacement worker answers (after its own start-up)
        assert pool.check("$4$", "$\\boxed{4}$").value == 1.0
    finally:
        pool.close()
