"""Where the test suite's CPU goes, process by process (issue 52): with RMSPEC_TEST_PROCESS_LOG=FILE, every
Python process the tests start (tests/conftest.py puts this folder on PYTHONPATH) appends one JSON line at exit:
its command, the test that started it, its wall and CPU seconds, and whether it imported torch.
`python scripts/process_log_summary.py FILE` groups the lines by command. Standard library only: it also loads
in vLLM's own venv. A process killed by a signal, or one that leaves through os._exit, writes no line."""

from __future__ import annotations

import atexit
import json
import os
import resource
import sys
import time

_LOG = os.environ.get("RMSPEC_TEST_PROCESS_LOG")
_STARTED = time.time()


def _write() -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    record = {
        "argv": [os.path.basename(sys.executable), *sys.argv[:4]],
        "test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0],
        "wall": round(time.time() - _STARTED, 2),
        "cpu": round(usage.ru_utime + usage.ru_stime, 2),
        "torch": "torch" in sys.modules,
    }
    try:
        with open(_LOG, "a") as handle:  # one short write per line: O_APPEND keeps the lines whole
            handle.write(json.dumps(record) + "\n")
    except OSError:
        pass


if _LOG:
    atexit.register(_write)
