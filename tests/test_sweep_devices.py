"""Which devices the trials running at once get (rmspec.sweep.devices): disjoint GPU sets sized by each
trial's plan, a trial waiting until enough are free, a trial larger than the host failing at once, and a
CPU host's cores cut into disjoint slices with OMP_NUM_THREADS per process. No GPU is needed: the pool is
given the host's GPU ids as CUDA_VISIBLE_DEVICES would list them."""

from __future__ import annotations

import threading
import time

import pytest

from rmspec.sweep.devices import DevicePool, Grant, core_slices, trials_at_once


def test_two_gpu_trials_on_an_eight_gpu_node_get_disjoint_pairs_and_the_fifth_waits():
    pool = DevicePool(parallel=8, gpus=[str(i) for i in range(8)])
    grants = [pool.take(2) for _ in range(4)]
    assert [g.gpus for g in grants] == [["0", "1"], ["2", "3"], ["4", "5"], ["6", "7"]]
    assert grants[1].environment(processes=2) == {"CUDA_VISIBLE_DEVICES": "2,3"}
    got: list[Grant] = []
    waiter = threading.Thread(target=lambda: got.append(pool.take(2)))
    waiter.start()
    time.sleep(0.3)
    assert not got  # no two trials on one device: it waits
    pool.give_back(grants[2])
    waiter.join(timeout=5)
    assert got and got[0].gpus == ["4", "5"]


def test_a_trial_needing_more_gpus_than_the_host_has_fails_saying_so():
    pool = DevicePool(parallel=2, gpus=["0", "1"])
    with pytest.raises(ValueError, match="needs 4 GPUs; this host has 2"):
        pool.take(4)


def test_cpu_host_cores_split_in_disjoint_slices_with_threads_per_process():
    assert core_slices([0, 1, 2, 3, 4, 5, 6, 7], 2) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert core_slices([0, 1], 3) == [[0], [1], [0]]  # more trials than cores: shared, one core each
    pool = DevicePool(parallel=2, gpus=[], cores=[0, 1, 2, 3])
    first, second = pool.take(0), pool.take(0)
    assert set(first.cores).isdisjoint(second.cores)
    assert first.environment(processes=2) == {"OMP_NUM_THREADS": "1"}
    assert second.environment(processes=1) == {"OMP_NUM_THREADS": "2"}


def test_trials_at_once_is_bounded_by_the_gpus_each_trial_takes():
    assert trials_at_once(parallel=8, gpus=8, per_trial=1) == 8
    assert trials_at_once(parallel=8, gpus=8, per_trial=2) == 4
    assert trials_at_once(parallel=2, gpus=8, per_trial=2) == 2
    assert trials_at_once(parallel=3, gpus=0, per_trial=1) == 3  # a CPU host
