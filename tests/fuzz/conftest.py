"""Settings shared by the fuzz tests: hypothesis profiles, the helpers' import path, a private
datasets cache (fuzzed files must not fill the user's ~/.cache)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # test_data_support, conftest helpers
sys.path.insert(0, str(HERE))  # harness

# CI replays a fixed set of examples (derandomized: a red CI run is reproducible, and no example
# database is written); a developer's run explores new ones each time. The per-case wall-time and
# memory bounds live in harness.py (hypothesis' own deadline is off: 2 shared cores make it flaky).
_common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                        HealthCheck.function_scoped_fixture])
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, **_common)
settings.register_profile("dev", print_blob=True, **_common)
settings.load_profile(os.environ.get("RMSPEC_FUZZ_PROFILE") or ("ci" if os.environ.get("CI") == "true" else "dev"))


@pytest.fixture(scope="session", autouse=True)
def _private_datasets_cache(tmp_path_factory):
    import datasets.config

    old = datasets.config.HF_DATASETS_CACHE
    datasets.config.HF_DATASETS_CACHE = tmp_path_factory.mktemp("hf-datasets")
    yield
    datasets.config.HF_DATASETS_CACHE = old
