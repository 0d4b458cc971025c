"""Clean after faults (issue #19): a SIGKILL of privreg leaves no worker process behind,
its temporary folders are swept at the next start, and outputs are never half-written.

Each killed process is started in a new session, so its process group (its pid) holds
exactly it and what it started; /proc tells which of those still run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import privreg
from privreg.cli.main import main
from privreg.core import files, workers

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

ROOT = Path(privreg.__file__).resolve().parents[1]


def _stat(pid):
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rfind(")") + 2 :].split()  # state, ppid, pgrp, ...


def live_in_group(pgid):
    """Pids of running (not zombie) processes in process group ``pgid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, _ppid, pgrp = _stat(entry.name)[:3]
        except (OSError, IndexError):
            continue
        if int(pgrp) == pgid and state not in ("Z", "X"):
            out.append(int(entry.name))
    return out


def start(argv, tmp_path, **env):
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    environ.pop("PRIVREG_DEBUG", None)
    return subprocess.Popen(
        argv,
        cwd=tmp_path,
        env=environ,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait_for(predicate, proc, timeout=90.0, what="the condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        if proc.poll() is not None:
            pytest.fail(f"the process ended (exit {proc.returncode}) before {what}: {proc.stderr.read().decode()}")
        time.sleep(0.02)
    pytest.fail(f"timed out waiting for {what}")


def kill_and_check_group(proc, grace=5.0):
    """SIGKILL ``proc`` alone (not its group) and assert that its workers end within
    ``grace`` seconds; kills and reports any that do not."""
    pgid = proc.pid
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    end = time.monotonic() + grace
    left = live_in_group(pgid)
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = live_in_group(pgid)
    for pid in left:  # do not leak them into the rest of the test run
        os.kill(pid, signal.SIGKILL)
    assert not left, f"{len(left)} process(es) survived the SIGKILL of their owner: {left}"


def test_parallel_batch_workers_die_with_a_killed_owner(tmp_path):
    """privreg.crypto.parallel's forkserver pool: workers blocked in a task (and the
    forkserver, the resource tracker) end within a poll after the owner's SIGKILL."""
    script = textwrap.dedent(
        """
        import time
        from privreg.crypto import parallel
        parallel.run_chunks(time.sleep, [(600,), (600,)], 2)
        """
    )
    proc = start([sys.executable, "-c", script], tmp_path)
    try:
        wait_for(lambda: len(live_in_group(proc.pid)) >= 4, proc, what="2 workers")  # + forkserver, tracker
        kill_and_check_group(proc)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_fork_pool_workers_die_with_a_killed_owner(tmp_path):
    """A multiprocessing fork pool with workers.initializer() (the ngrams plugin's pools)."""
    script = textwrap.dedent(
        """
        import multiprocessing as mp, time
        from privreg.core import workers
        init, args = workers.initializer()
        with mp.get_context("fork").Pool(2, initializer=init, initargs=args) as pool:
            pool.map(time.sleep, [600, 600])
        """
    )
    proc = start([sys.executable, "-c", script], tmp_path)
    try:
        wait_for(lambda: len(live_in_group(proc.pid)) >= 3, proc, what="2 workers")
        kill_and_check_group(proc)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_watchdog_ends_a_worker_whose_owner_is_gone(tmp_path):
    """The portable fallback alone (no parent-death signal): a worker bound to an owner
    that has exited ends within a poll."""
    script = textwrap.dedent(
        """
        import os, sys, time
        from privreg.core import workers
        child = os.fork()
        if child == 0:  # the owner: exits at once
            os._exit(0)
        os.waitpid(child, 0)
        workers.bind_to_parent(child, fast_path=False)
        time.sleep(30)
        sys.exit(0)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=20, check=False
    )
    assert proc.returncode == workers.WORKER_EXIT_CODE


def _example(workflow):
    item = privreg.default_registry().get(workflow)
    out = []
    for name, value in item.example.params.items():
        out += ["--" + name.replace("_", "-"), str(value)]
    return out


def test_sigkill_of_spam_filter_with_workers_leaves_no_process(tmp_path):
    """The issue's case: ``privreg run spam-filter --workers 2`` killed with SIGKILL left
    4 processes (2 workers, the forkserver, the resource tracker)."""
    args = _example("spam-filter")
    i = args.index("--workers")
    args[i + 1] = "2"
    args[args.index("--train") + 1] = "40"  # a longer run, so that it is killed mid-way
    args[args.index("--test") + 1] = "40"
    proc = start([sys.executable, "-m", "privreg", "run", "spam-filter", *args, "-o", "out"], tmp_path)
    try:
        wait_for(lambda: len(live_in_group(proc.pid)) >= 4, proc, what="the workers of the run")
        kill_and_check_group(proc)
    finally:
        if proc.poll() is None:
            proc.kill()


def _big_corpus(path, rows=150_000):
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"]
    with path.open("w", encoding="utf-8") as fh:
        fh.write("user_id,text\n")
        for r in range(rows):
            fh.write(f"u{r % 5000},{' '.join(words[(r + k) % 10] for k in range(12))}\n")


def test_sigkill_of_ngrams_leaves_no_process_and_its_temp_folder_is_swept(tmp_path):
    """``privreg run ngrams --workers 2`` killed while it partitions its input: no process
    survives, its ``privreg-ngrams.<pid>.*`` folder stays (no Python code ran), and the
    next start removes it once it is older than a minute."""
    corpus = tmp_path / "corpus.csv"
    _big_corpus(corpus)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    argv = [sys.executable, "-m", "privreg", "run", "ngrams", "--input", str(corpus), "--workers", "2"]
    argv += ["--max-n", "3", "--max-keys", "50", "-o", "out"]
    proc = start(argv, tmp_path, TMPDIR=str(tmp))
    try:
        wait_for(
            lambda: any(tmp.glob(f"privreg-ngrams.{proc.pid}.*")) and len(live_in_group(proc.pid)) >= 3,
            proc,
            what="the temporary folder and the tokenizing workers",
        )
        kill_and_check_group(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    (left,) = tmp.glob(f"privreg-ngrams.{proc.pid}.*")
    # a folder of a dead owner younger than a minute is kept (pid namespaces: see core.files)
    assert files.sweep_temp_dirs(tmp) == [] and left.exists()
    old = time.time() - 120
    os.utime(left, (old, old))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
    done = subprocess.run(
        [sys.executable, "-m", "privreg", "run", "bounded-mean", "-o", "next"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not left.exists() and list(tmp.iterdir()) == []


def test_sweep_keeps_live_owners_young_folders_and_others(tmp_path):
    mine = files.make_temp_dir("unit", tmp_path)
    dead = tmp_path / "privreg-unit.999999999.abc123"
    dead.mkdir()
    young = tmp_path / "privreg-unit.999999998.def456"
    young.mkdir()
    other = tmp_path / "privreg-keep-me"
    other.mkdir()
    old = time.time() - 120
    for p in (mine, dead, other):
        os.utime(p, (old, old))
    assert files.sweep_temp_dirs(tmp_path) == [dead]
    assert mine.exists() and young.exists() and other.exists()
    with files.temporary_dir("unit", tmp_path) as t:
        assert t.name.startswith(f"privreg-unit.{os.getpid()}.")
    assert not t.exists()


def _fail_inside_temporary_dir(folder):
    with files.temporary_dir("unit", folder) as t:
        (t / "x").write_text("x")
        raise RuntimeError("boom")


def test_temporary_dir_is_removed_on_error(tmp_path):
    with pytest.raises(RuntimeError):
        _fail_inside_temporary_dir(tmp_path)
    assert list(tmp_path.iterdir()) == []


def _fail_mid_write(target):
    with files.atomic_write(target, "output") as fh:
        fh.write('{"new": ')
        raise RuntimeError("killed mid-way")


def test_atomic_write_never_leaves_a_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "run.json"
    target.write_text('{"old": true}\n')
    with pytest.raises(RuntimeError):
        _fail_mid_write(target)
    assert json.loads(target.read_text()) == {"old": True}
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(privreg.PrivregValueError, match="no space left"):
        files.write_text(target, '{"new": true}\n', "output")
    assert json.loads(target.read_text()) == {"old": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_run_json_is_complete_or_absent_on_a_full_disk(capsys, tmp_path, monkeypatch):
    """A full disk while run.json is written: exit 2, and run.json is absent, not 0 bytes."""
    real = files.atomic_write

    def full(path, what, **kw):
        if Path(path).name == "run.json":
            raise files.file_error(OSError(28, "No space left on device"), path, what, doing="written")
        return real(path, what, **kw)

    monkeypatch.setattr(files, "atomic_write", full)
    code = main(["run", "bounded-mean", "-o", str(tmp_path / "out")])
    _, err = capsys.readouterr()
    assert code == 2 and "no space left" in err and err.count("\n") == 1
    assert not (tmp_path / "out" / "run.json").exists()


def test_sigterm_runs_cleanups(tmp_path):
    """SIGTERM ends a run like Ctrl-C: exit 143, the temporary folder removed."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = textwrap.dedent(
        """
        import sys, time
        from privreg.cli import main as cli
        from privreg.core import files

        def slow(args):
            with files.temporary_dir("term"):
                print("ready", flush=True)
                # Short steps: a signal landing between the interpreter's last check
                # and the start of a long sleep would wait out the whole sleep.
                for _ in range(6000):
                    time.sleep(0.01)
            return 0

        cli.cmd_plugins = slow
        sys.exit(cli.main(["plugins"]))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert len(list(tmp.iterdir())) == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=50) == 143
        assert proc.stderr.read().strip() == "privreg: terminated"
        assert list(tmp.iterdir()) == []
    finally:
        if proc.poll() is None:
            proc.kill()
