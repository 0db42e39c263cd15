"""`declrag.runtime.process_memory`: each stage's peak resident memory, measured on known allocations."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from declrag.runtime.process_memory import MemoryTracker, describe, hwm_bytes, reset_hwm, rss_bytes

MB = 1024 * 1024
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")


def touch(mb: int) -> np.ndarray:
    a = np.ones(mb * MB // 8)  # np.ones writes every page: all of it is resident
    assert a.sum() == a.size
    return a


@linux
def test_a_stage_sees_its_allocation_and_the_next_stage_starts_from_a_reset_mark():
    if not reset_hwm():
        pytest.skip("this kernel refuses to reset VmHWM")
    t = MemoryTracker()
    assert t.method == "vmhwm"
    with t.stage("big"):
        a = touch(200)
        del a  # freed before the stage ends: only the high-water mark remembers it
    with t.stage("small"):
        b = touch(20)
        del b
    big, small = t.stages["big"], t.stages["small"]
    assert big["peak_mb"] - big["start_mb"] >= 150
    assert big["end_mb"] < big["peak_mb"] - 150  # the array was gone when the stage ended
    assert small["peak_mb"] < big["peak_mb"] - 100  # the mark was reset between the stages
    assert t.peak_mb() == big["peak_mb"]
    assert t.to_dict()["stages"].keys() == {"big", "small"}


@linux
def test_an_inner_stage_resetting_the_mark_does_not_hide_the_outer_stages_peak():
    t = MemoryTracker()
    with t.stage("outer"):
        a = touch(200)
        del a
        with t.stage("outer.inner"):
            b = touch(20)
            del b
    outer, inner = t.stages["outer"], t.stages["outer.inner"]
    assert outer["peak_mb"] - outer["start_mb"] >= 150
    assert inner["peak_mb"] < outer["peak_mb"] - 100
    assert "outer" in describe(t.to_dict()) and "inner" not in describe(t.to_dict())


@linux
def test_where_the_mark_cannot_be_reset_the_rss_is_sampled(monkeypatch):
    import declrag.runtime.process_memory as memory

    monkeypatch.setattr(memory, "reset_hwm", lambda: False)
    t = MemoryTracker(interval_s=0.01)
    assert t.method == "sampled"
    with t.stage("held"):
        a = touch(200)  # still held when the stage ends: the last reading sees it, whatever the sampler caught
    del a
    with t.stage("after"):
        pass
    held, after = t.stages["held"], t.stages["after"]
    assert held["peak_mb"] - held["start_mb"] >= 150
    assert after["peak_mb"] < held["peak_mb"] - 100
    assert t._thread is None  # the sampler stops when no stage is open


def test_readings_exist_or_say_so():
    if sys.platform.startswith("linux"):
        rss, hwm = rss_bytes(), hwm_bytes()
        assert rss and hwm and hwm >= rss > 10 * MB
    t = MemoryTracker()
    with t.stage("x"):
        pass
    d = t.to_dict()
    assert d["method"] in ("vmhwm", "sampled", "none") and "seconds" in d["stages"]["x"]
