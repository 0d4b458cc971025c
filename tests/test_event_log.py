"""EventLog, the in-memory charger: every charge is kept, in order, with the parameters
it was given at the time, also when threads charge and read at once."""

from __future__ import annotations

import threading

from privreg import EventLog
from privreg.core.events import PureDP


def test_charges_keep_order_and_the_values_given_at_the_time(tmp_path):
    log = EventLog()
    params = {"epsilon": 1.0}
    randomness = {"source": "SecureRandom", "reproducible": False}
    log.charge(PureDP(epsilon=1.0), mechanism="a", parameters=params, randomness=randomness)
    params["epsilon"] = 9.0  # the caller's dicts change after the charge: the log keeps its copy
    randomness["source"] = "other"
    log.charge(PureDP(epsilon=0.5), mechanism="b", parameters=params, label="second")
    assert [c.mechanism for c in log.charges] == ["a", "b"]
    first, second = log.charges
    assert first.parameters == {"epsilon": 1.0} and first.randomness["source"] == "SecureRandom"
    assert second.parameters == {"epsilon": 9.0} and second.label == "second" and second.randomness == {}
    assert log.events == (PureDP(epsilon=1.0), PureDP(epsilon=0.5))
    log.charge(PureDP(epsilon=0.25), mechanism="c", parameters={})  # after a read: appended, in order
    assert [c.mechanism for c in log.charges] == ["a", "b", "c"]
    back = EventLog.read_jsonl(log.write_jsonl(tmp_path / "log.jsonl"))
    assert [(c.mechanism, c.event) for c in back] == [(c.mechanism, c.event) for c in log.charges]


def test_threads_charging_and_reading_lose_nothing():
    """Four threads charge 2000 events each while another reads the log: every charge is
    there once, and each thread's charges in its own order."""
    log = EventLog()
    done = threading.Event()

    def charge(name):
        for i in range(2000):
            log.charge(PureDP(epsilon=1.0), mechanism=name, parameters={"i": i})

    seen = []

    def read():
        try:
            while not done.is_set():
                seen.append(len(log.charges))
        except Exception as error:  # noqa: BLE001 -- reported by the test thread below
            seen.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=charge, args=(f"t{k}",)) for k in range(4)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    done.set()
    reader.join()
    charges = log.charges
    assert seen and all(isinstance(n, int) and n <= 8000 for n in seen), seen[-1:]
    assert seen == sorted(seen)  # a read never loses charges seen before
    assert len(charges) == 8000
    for k in range(4):
        assert [c.parameters["i"] for c in charges if c.mechanism == f"t{k}"] == list(range(2000))
