"""Progress reports (issue #21, item 6): the callback of privreg.core.progress, the
console reporters of privreg.progress, and the long phases that report through them.

Every phase's reports must be monotone, start at 0 and end at their total; a callback
must never change a result or the randomness drawn (same seed, with and without a
callback: identical outputs); the CLI writes progress to stderr only, as tqdm bars on a
terminal and as rate-limited plain lines otherwise or without tqdm."""

from __future__ import annotations

import io
import sys
from collections import defaultdict

import numpy as np
import pytest
import scipy.sparse as sp
from crypto_keys import cached_keypair

from privreg.audit import audit_extreme_neighbours, audit_item
from privreg.cli.main import main
from privreg.core.charging import EventLog
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.progress import PhaseProgress, silent
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.core.registry import default_registry
from privreg.core.workflow import WorkflowContext
from privreg.mpc.runtime import run_protocol
from privreg.plugins.ngrams.workflow import ngrams_workflow
from privreg.plugins.pprl import dice_protocol
from privreg.plugins.pprl import workflow as pprl_workflow_module
from privreg.plugins.pprl.protocol import LINKAGE_UNIT
from privreg.plugins.pprl.workflow import pprl_workflow
from privreg.plugins.spam.corpus import bundled_corpus, paper_split
from privreg.plugins.spam.evaluation import EvaluationConfig, PrivateEvaluation, expected_labels
from privreg.plugins.spam.features import NgramHasher
from privreg.plugins.spam.workflow import run_spam
from privreg.progress import PlainReporter, Reporter, TqdmReporter, console_reporter


class Recorder:
    """A progress callback that keeps every report."""

    def __init__(self):
        self.reports = []

    def __call__(self, phase, done, total, unit):
        assert isinstance(phase, str) and isinstance(unit, str) and isinstance(done, int)
        self.reports.append((phase, done, total, unit))

    def phases(self):
        by = defaultdict(list)
        for phase, done, total, unit in self.reports:
            by[phase].append((done, total, unit))
        return dict(by)

    def check_complete(self, phase):
        """The reports of ``phase``: start at 0, monotone, one unit, end at the total.
        Returns the total."""
        seen = self.phases()[phase]
        done = [d for d, _, _ in seen]
        assert done[0] == 0 and done == sorted(done), seen
        assert len({u for _, _, u in seen}) == 1, seen
        total = seen[-1][1]
        assert total is not None and done[-1] == total, seen
        return total


# ------------------------------------------------------------------ the helper


def test_phase_progress_is_monotone_clamped_and_finishes():
    rec = Recorder()
    p = PhaseProgress(rec, "x", total=5, unit="item")
    p.advance(2)
    p.update(1)  # going back is ignored
    p.advance(10)  # clamped at the total
    p.finish()
    assert rec.reports == [("x", 0, 5, "item"), ("x", 2, 5, "item"), ("x", 5, 5, "item")]
    rec = Recorder()
    with PhaseProgress(rec, "y", total=None, unit="round") as q:
        q.advance()
        q.advance()
    assert rec.reports[-1] == ("y", 2, 2, "round")  # an unknown total ends at the final count
    rec = Recorder()

    def stops_halfway():
        with PhaseProgress(rec, "z", total=3, unit="u") as r:
            r.advance()
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        stops_halfway()
    assert rec.reports[-1] == ("z", 1, 3, "u")  # no claim of completion after an error


def test_a_failing_callback_warns_once_and_never_stops_the_work():
    calls = []

    def broken(*report):
        calls.append(report)
        raise OSError("display gone")

    with pytest.warns(RuntimeWarning, match="no longer reported"):
        p = PhaseProgress(broken, "x", total=3, unit="u")
    p.advance()
    p.finish()
    assert len(calls) == 1 and p.done == 3


def test_callbacks_are_checked_early():
    with pytest.raises(PrivregTypeError, match="progress"):
        WorkflowContext(progress=42)
    assert WorkflowContext(progress=None).progress is silent
    with pytest.raises(PrivregTypeError, match="progress"):
        PrivateEvaluation(config=EvaluationConfig(d=3), count=1, progress="yes")


# ------------------------------------------------------------------ reporters


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_plain_lines_are_rate_limited():
    out, clock = io.StringIO(), FakeClock()
    rep = PlainReporter(out, interval=5.0, heartbeat=60.0, clock=clock)
    rep("work", 0, 1000, "message")  # the start: always shown
    for done in range(1, 1000):  # 999 reports over 999 s, one per second
        clock.now = float(done)
        rep("work", done, 1000, "message")
    clock.now = 1000.0
    rep("work", 1000, 1000, "message")  # the end: always shown
    lines = out.getvalue().splitlines()
    assert lines[0] == "progress: work: 0/1,000 messages (0%)"
    assert lines[-1].startswith("progress: work: 1,000/1,000 messages (100%), elapsed 16:40")
    # of 1001 reports: start, end, a line per tenth (9) and, since a tenth takes 100 s, a
    # heartbeat line 60 s after each of the 10 previous lines
    assert len(lines) == 21
    assert lines[1].startswith("progress: work: 60/1,000 messages (6%), elapsed 1:00, about 15:40 left")
    assert lines[2].startswith("progress: work: 100/1,000 messages (10%)")
    assert all(line.startswith("progress: work: ") for line in lines)


def test_plain_lines_never_come_faster_than_the_interval():
    out, clock = io.StringIO(), FakeClock()
    rep = PlainReporter(out, interval=5.0, clock=clock)
    for done in range(100):  # every tenth reached within one second: only start and end
        clock.now = done / 100
        rep("fast", done, 100, "batch")
    rep("fast", 100, 100, "batch")
    assert out.getvalue().splitlines() == [
        "progress: fast: 0/100 batches (0%)",
        "progress: fast: 100/100 batches (100%)",
    ]
    out.truncate(0), out.seek(0)
    rep("open", 0, None, "round")  # an unknown total: a line per interval at most
    for t in range(1, 21):
        clock.now = 10 + t
        rep("open", t, None, "round")
    assert len(out.getvalue().splitlines()) == 1 + 4


def test_reporters_write_to_stderr_only(capsys):
    rep = console_reporter(mode="plain")
    assert isinstance(rep, PlainReporter)
    rep("phase", 0, 2, "step")
    rep("phase", 2, 2, "step")
    rep.echo("a message")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "progress: phase: 0/2 steps (0%)",
        "progress: phase: 2/2 steps (100%)",
        "a message",
    ]
    quiet = console_reporter(mode="off")
    quiet("phase", 1, 2, "step")
    assert type(quiet) is Reporter and capsys.readouterr() == ("", "")


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_tqdm_bars_and_a_log_plain_lines(monkeypatch):
    pytest.importorskip("tqdm")
    monkeypatch.delenv("PRIVREG_PROGRESS", raising=False)
    assert isinstance(console_reporter(FakeTerminal()), TqdmReporter)
    assert isinstance(console_reporter(io.StringIO()), PlainReporter)  # not a terminal
    monkeypatch.setenv("PRIVREG_PROGRESS", "plain")
    assert isinstance(console_reporter(FakeTerminal()), PlainReporter)
    monkeypatch.setenv("PRIVREG_PROGRESS", "bars")
    with pytest.raises(PrivregValueError, match="PRIVREG_PROGRESS"):
        console_reporter(FakeTerminal())


def test_tqdm_bars_follow_the_reports():
    pytest.importorskip("tqdm")
    term = FakeTerminal()
    rep = TqdmReporter(term)
    rep("phase", 0, 4, "step")
    rep("phase", 3, 4, "step")
    assert rep._bars["phase"].n == 3
    rep("phase", 4, 4, "step")  # the end closes the bar
    assert not rep._bars and "phase" in term.getvalue()


def test_the_cli_falls_back_to_plain_lines_without_tqdm(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    monkeypatch.delenv("PRIVREG_PROGRESS", raising=False)
    term = FakeTerminal()
    assert isinstance(console_reporter(term), PlainReporter)
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["audit-mechanism", "laplace", "--samples", "1000", "--insecure-seed", "1"]) == 0
    out = capsys.readouterr().out
    err = term.getvalue()
    assert "progress: audit laplace: 0/2,000 outputs (0%)" in err
    assert "progress: audit laplace: 2,000/2,000 outputs (100%)" in err
    assert "verdict" in out and "progress: audit" not in out  # results on stdout, progress on stderr


# ------------------------------------------------------------------ the audit


def test_audit_reports_the_outputs_drawn_and_keeps_its_result():
    item = default_registry().get("laplace")
    rec = Recorder()
    seen = audit_item(item, samples=1000, rng=InsecureReproducibleRandom(seed=3), progress=rec)
    assert rec.check_complete("audit laplace") == 2000
    assert [d for _, d, _, _ in rec.reports] == [0, 1000, 2000]
    assert seen == audit_item(item, samples=1000, rng=InsecureReproducibleRandom(seed=3))
    rec = Recorder()
    extreme = audit_extreme_neighbours(item, samples=1000, rng=InsecureReproducibleRandom(seed=4), progress=rec)
    assert rec.check_complete("extreme neighbours of laplace") == len(extreme.results) + len(extreme.refused)
    assert extreme == audit_extreme_neighbours(item, samples=1000, rng=InsecureReproducibleRandom(seed=4))


# ------------------------------------------------------------------ spam filter


def test_spam_evaluation_reports_each_batch_and_keeps_its_labels():
    _, te = paper_split(bundled_corpus(), train=10, test=12)
    X = NgramHasher(space=64).transform(te)
    w = np.random.default_rng(0).normal(scale=0.3, size=64)
    labels = {}
    for batch in (5, 100):  # three batches, or one
        cfg = EvaluationConfig(d=64, w_bound=1.0, workers=1, batch=batch)
        rec = Recorder()
        proto = PrivateEvaluation(
            config=cfg,
            count=12,
            keypair=cached_keypair(512, 3),
            w=w,
            X=X,
            allow_insecure=True,
            rng=InsecureReproducibleRandom(seed=5),
            progress=rec,
        )
        labels[batch] = run_protocol(proto).outputs["carol"]["labels"]
        assert rec.check_complete("private evaluation") == 12
        expected = [0, 5, 10, 12] if batch == 5 else [0, 12]
        assert [d for _, d, _, _ in rec.reports] == expected
    np.testing.assert_array_equal(labels[5], labels[100])
    np.testing.assert_array_equal(labels[5], expected_labels(w, sp.csr_matrix(X), cfg))


SPAM = dict(
    bundled=True,
    train=20,
    test=20,
    space=128,
    hash="mix",
    max_active=32,
    batch_size=5,
    eta=0.05,
    period=32.0,
    harmonics=11,
    key_bits=256,
    insecure_small_keys=True,
    dp="gradient",  # Gaussian noise on every batch gradient: the model depends on the randomness
    epsilon=1.0,
    delta=1e-6,
    private_eval=6,
    workers=1,
)


def test_spam_workflow_reports_training_and_evaluation_and_keeps_the_model():
    rec = Recorder()
    run = run_spam(context=WorkflowContext(rng=InsecureReproducibleRandom(seed=2), progress=rec), **SPAM)
    assert rec.check_complete("private training") == run["training"]["steps"] == 4
    assert rec.check_complete("private evaluation") == 6
    quiet = run_spam(context=WorkflowContext(rng=InsecureReproducibleRandom(seed=2)), **SPAM)
    np.testing.assert_array_equal(run["_w"]["private"], quiet["_w"]["private"])
    assert run["evaluation"]["accuracy"] == quiet["evaluation"]["accuracy"]


# ------------------------------------------------------------------ record linkage


def _linkage_unit_outputs(monkeypatch):
    outputs = []
    real = pprl_workflow_module.run_protocol

    def spy(proto, **kw):
        res = real(proto, **kw)
        outputs.append(res.outputs[LINKAGE_UNIT])
        return res

    monkeypatch.setattr(pprl_workflow_module, "run_protocol", spy)
    return outputs


def test_pprl_recommended_profile_reports_its_phases_and_keeps_its_result(monkeypatch):
    monkeypatch.setattr(dice_protocol, "BATCH_DECISIONS", 8)  # several batches of decisions per pair
    outputs = _linkage_unit_outputs(monkeypatch)
    small = dict(data="synthetic", records=60, key_bits=512, insecure_small_keys=True, workers=1)
    rec = Recorder()
    res = pprl_workflow(context=WorkflowContext(rng=InsecureReproducibleRandom(seed=7), progress=rec), **small)
    m = res.metrics
    assert rec.check_complete("encoding") == 3
    assert rec.check_complete("blocking") == 3  # pairs of parties
    base = rec.check_complete("secure decisions")
    levels = rec.check_complete("stricter levels") if "stricter levels" in rec.phases() else 0
    # dummy candidate pairs (membership padding) are decided like the real ones
    assert base == outputs[0]["candidate_count"] + outputs[0]["dummy_pairs"] and base + levels == m["decisions"]
    assert len(rec.phases()["secure decisions"]) > 4  # reported per batch, not per pair of parties
    pprl_workflow(context=WorkflowContext(rng=InsecureReproducibleRandom(seed=7)), **small)
    with_progress, without = outputs
    assert with_progress["group_ids"] == without["group_ids"]  # random ids: the same draws
    assert with_progress["groups"] == without["groups"]


def test_pprl_paper_profile_reports_setup_and_rounds():
    rec = Recorder()
    pprl_workflow(
        context=WorkflowContext(rng=InsecureReproducibleRandom(seed=5), progress=rec),
        profile="paper",
        data="synthetic",
        records=80,
        lsh_groups=8,
        lsh_bits=10,
        key_bits=512,
        insecure_small_keys=True,
        workers=1,
    )
    assert rec.check_complete("encoding") == 3
    assert rec.check_complete("MP-SPPRL setup") == 3
    assert rec.check_complete("matching rounds") >= 1


# ------------------------------------------------------------------ n-grams


def test_ngrams_report_each_release_and_keep_the_output():
    rec = Recorder()
    seen = ngrams_workflow(
        context=WorkflowContext(charger=EventLog(), rng=InsecureReproducibleRandom(seed=2), progress=rec)
    )
    assert rec.check_complete("n-gram extraction") == seen.metrics["max_n"]  # DPNE: one release per length
    quiet = ngrams_workflow(context=WorkflowContext(charger=EventLog(), rng=InsecureReproducibleRandom(seed=2)))
    assert seen.metrics["counts"] == quiet.metrics["counts"]
    assert seen.summary == quiet.summary


def test_the_deprecated_progress_flag_still_shows_progress(capsys, monkeypatch):
    monkeypatch.delenv("PRIVREG_PROGRESS", raising=False)
    messages = []
    ctx = WorkflowContext(charger=EventLog(), rng=InsecureReproducibleRandom(seed=2), echo=messages.append)
    ngrams_workflow(context=ctx, method="dpsu-all", progress=True)
    assert any("deprecated" in m for m in messages)
    assert "n-gram extraction: 1/1 release (100%)" in capsys.readouterr().err


def test_plain_lines_spell_plural_units():
    from privreg.progress import _plural

    assert [_plural(u, 2) for u in ("party", "party pair", "batch", "day", "decision")] == [
        "parties",
        "party pairs",
        "batches",
        "days",
        "decisions",
    ]
    assert _plural("party", 1) == "party"
