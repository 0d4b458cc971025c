"""privreg.timing: the phase timer and its CPU clocks."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys
import time

import pytest

from privreg.core.errors import PrivregTypeError
from privreg.timing import PhaseTimer, process_cpu_seconds, process_tree_cpu_seconds


class FakeClock:
    """A CPU clock that advances by a set amount at every reading."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_phase_sums_every_interval_of_a_phase_and_keeps_listed_phases():
    timer = PhaseTimer(["a", "never"], cpu_clock=FakeClock(1.0))
    with timer.phase("a"):
        time.sleep(0.01)
    with timer.phase("b"):
        pass
    with timer.phase("a"):
        pass
    assert list(timer.wall) == list(timer.cpu) == ["a", "never", "b"]
    assert timer.cpu == {"a": 2.0, "never": 0.0, "b": 1.0}  # one clock step per interval
    assert timer.wall["a"] >= 0.01 and timer.wall["never"] == 0.0


def test_phase_charges_a_block_that_raises():
    timer = PhaseTimer(cpu_clock=FakeClock(0.5))
    with pytest.raises(RuntimeError), timer.phase("fails"):
        raise RuntimeError("inside the phase")
    assert timer.cpu == {"fails": 0.5}


def test_laps_follow_one_another_and_mark_leaves_out_a_wait():
    clock = FakeClock(1.0)
    timer = PhaseTimer(cpu_clock=clock)  # reading 1 at creation
    time.sleep(0.01)
    wall, cpu = timer.lap("first")  # reading 2
    assert cpu == 1.0 and wall >= 0.01 and timer.wall["first"] == wall
    time.sleep(0.05)
    timer.mark()  # reading 3: the sleep is not charged
    wall, cpu = timer.lap("second")  # reading 4
    assert cpu == 1.0 and wall < 0.05
    timer.lap("first")
    assert timer.cpu == {"first": 2.0, "second": 1.0}
    assert timer.elapsed() >= 0.06


def test_a_phase_does_not_move_the_lap_mark():
    timer = PhaseTimer(cpu_clock=FakeClock(1.0))  # reading 1
    with timer.phase("inner"):  # readings 2, 3
        pass
    _, cpu = timer.lap("outer")  # reading 4: since creation
    assert cpu == 3.0


def test_bad_arguments_name_the_fix():
    with pytest.raises(PrivregTypeError, match="cpu_clock"):
        PhaseTimer(cpu_clock=1.0)
    with pytest.raises(PrivregTypeError, match="phase name"):
        PhaseTimer([3])
    timer = PhaseTimer()
    with pytest.raises(PrivregTypeError, match="phase name"):
        timer.lap(None)


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def _spin_then_wait(ready, done) -> None:
    _spin(0.3)
    ready.set()
    done.wait(30)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child CPU is read from /proc")
def test_process_tree_clock_counts_a_live_child():
    ctx = mp.get_context("spawn")
    ready, done = ctx.Event(), ctx.Event()
    before_own, before_tree = process_cpu_seconds(), process_tree_cpu_seconds()
    child = ctx.Process(target=_spin_then_wait, args=(ready, done))
    child.start()
    try:
        assert ready.wait(60)
        own = process_cpu_seconds() - before_own
        tree = process_tree_cpu_seconds() - before_tree
    finally:
        done.set()
        child.join(30)
    assert tree >= own + 0.25  # the child's spin, which this process's clock misses


def test_process_tree_clock_keeps_a_reaped_child():
    # a child reaped between two readings moves from the /proc term to RUSAGE_CHILDREN
    # with its whole total: the difference still holds its work
    before = process_tree_cpu_seconds()
    code = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert process_tree_cpu_seconds() - before >= 0.25
