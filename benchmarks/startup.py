"""CLI start-up: CPU and wall time of `privreg --version` and `privreg --help`.

Target (issue #29): each takes at most 0.3 s CPU (user + sys of the process), with no
numpy or scipy imported. Each command runs N times in a fresh interpreter, the commands
interleaved so that load spikes spread over all rows; a row gives the median and the
minimum over its runs. CPU is the child's own user + sys from `os.wait4` (exactly that
process, nothing else); wall is `time.perf_counter` around spawn and wait, so on a shared
machine it includes waiting for a core. The baselines run in the same loop: the bare
interpreter, `import numpy` and `import scipy.stats` (what `privreg --version` used to
load through the accountants).

    python benchmarks/startup.py [--runs N] [--quick] [--compare DIR]

``--compare DIR`` adds the two privreg rows run from another checkout (e.g. the commit
before the start-up work), in the same loop.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from timing import machine

ROOT = Path(__file__).resolve().parents[1]
TARGET_CPU = 0.3  # seconds, issue #29

# (label, arguments after the interpreter); `-m privreg` runs privreg.cli.main:main, the
# console script's entry point, from this checkout
COMMANDS = [
    ("python -c pass (interpreter baseline)", ["-c", "pass"]),
    ('python -c "import numpy" (baseline)', ["-c", "import numpy"]),
    ('python -c "import scipy.stats" (baseline)', ["-c", "import scipy.stats"]),
    ("privreg --version", ["-m", "privreg", "--version"]),
    ("privreg --help", ["-m", "privreg", "--help"]),
]
PRIVREG_ROWS = ("privreg --version", "privreg --help")


def run_once(args: list[str], root: Path = ROOT) -> tuple[float, float]:
    """(CPU s, wall s) of one run: user + sys of the child itself, from wait4."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], cwd=root, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    if proc.returncode != 0:
        raise SystemExit(f"{args} exited with {proc.returncode}")
    return usage.ru_utime + usage.ru_stime, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=21, help="runs of each command (default 21)")
    parser.add_argument("--quick", action="store_true", help="3 runs of each command (checks that it runs)")
    parser.add_argument("--compare", type=Path, metavar="DIR", help="also run privreg from this checkout")
    opts = parser.parse_args()
    runs = 3 if opts.quick else opts.runs
    commands = [(label, args, ROOT) for label, args in COMMANDS]
    if opts.compare is not None:
        commands += [(f"{label} ({opts.compare})", args, opts.compare) for label, args in COMMANDS[-2:]]
    cpu: dict[str, list[float]] = {label: [] for label, _, _ in commands}
    wall: dict[str, list[float]] = {label: [] for label, _, _ in commands}
    for _, args, root in commands:  # one warm-up each: the page cache, not the interpreter, is warmed
        run_once(args, root)
    for _ in range(runs):
        for label, args, root in commands:
            c, w = run_once(args, root)
            cpu[label].append(c)
            wall[label].append(w)
    print(f"CLI start-up, {runs} runs per command, one process at a time\n[{machine()}]")
    print("[CPU: user + sys of the child process (os.wait4); wall: spawn to exit, including waiting for a core]")
    width = max(len(label) for label, _, _ in commands)
    print(f"{'command':<{width}}  {'CPU s median':>12}  {'CPU s min':>9}  {'wall s median':>13}  {'wall s min':>10}")
    for label, _, _ in commands:
        print(
            f"{label:<{width}}  {statistics.median(cpu[label]):>12.3f}  {min(cpu[label]):>9.3f}  "
            f"{statistics.median(wall[label]):>13.3f}  {min(wall[label]):>10.3f}"
        )
    worst = max(statistics.median(cpu[label]) for label in PRIVREG_ROWS)
    verdict = "met" if worst <= TARGET_CPU else "NOT met"
    print(f"\ntarget: privreg --version and --help <= {TARGET_CPU} s CPU (median): {verdict} (worst {worst:.3f} s)")


if __name__ == "__main__":
    main()
