"""TEST-ONLY (tests/helpers/fsdp_cpu_shim.py): on PYTHONPATH only for the children of FSDP-on-CPU tests.

In rmspec's launched training processes it installs the FSDP-on-CPU shim (RMSPEC_TEST_FSDP_CPU_SHIM=1)
and the recorder the tests read (RMSPEC_TEST_FSDP_RECORD=DIR). Other processes (the launcher) are left
alone. A shim that cannot install raises here, so the run fails instead of silently training DDP.
"""

import os
import sys

if "rmspec.launch.entrypoint" in sys.orig_argv and (
    os.environ.get("RMSPEC_TEST_FSDP_CPU_SHIM") == "1" or os.environ.get("RMSPEC_TEST_FSDP_RECORD")
):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/helpers
    if os.environ.get("RMSPEC_TEST_FSDP_CPU_SHIM") == "1":
        import fsdp_cpu_shim

        fsdp_cpu_shim.install()
    if os.environ.get("RMSPEC_TEST_FSDP_RECORD"):
        import fsdp_recorder

        fsdp_recorder.install(os.environ["RMSPEC_TEST_FSDP_RECORD"])
    sys.path.pop(0)
