"""Third-party plugins installed as real distributions are found through the entry point."""

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import TEMPLATE

from privreg.accountant.zcdp import zcdp_epsilon


def _env(*paths):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), env.get("PYTHONPATH", "")])
    env.pop("PRIVREG_PLUGINS", None)
    env.pop("PRIVREG_DISABLE_PLUGIN_AUTOLOAD", None)
    return env


def _privreg(env, *args):
    return subprocess.run([sys.executable, "-m", "privreg", *args], capture_output=True, text=True, env=env)


# a pip build and a python subprocess or two in every test
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed_template(tmp_path_factory):
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(TEMPLATE),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return target


def test_installed_template_plugin_is_listed(installed_template):
    env = _env(installed_template)
    out = _privreg(env, "list")
    assert out.returncode == 0, out.stderr
    assert "template-histogram-mechanism" in out.stdout and "template-histogram" in out.stdout
    assert "laplace" in out.stdout  # the built-in plugin is still there
    out = _privreg(env, "plugins")
    assert "privreg-plugin-template" in out.stdout
    out = _privreg(env, "describe", "template-histogram")
    assert "Ghosh" in out.stdout and "--column" in out.stdout


def test_installed_template_workflow_runs(installed_template, tmp_path):
    out = _privreg(_env(installed_template), "run", "template-histogram", "--column", "sex", "-o", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "Female" in out.stdout and (tmp_path / "ledger.sqlite").is_file()


def test_template_plugin_own_tests_pass(installed_template):
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(TEMPLATE / "tests")],
        capture_output=True,
        text=True,
        env=_env(installed_template),
        cwd=TEMPLATE,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_allow_list_hides_the_template(installed_template):
    env = _env(installed_template)
    env["PRIVREG_PLUGINS"] = "standard"
    out = _privreg(env, "list")
    assert "template-histogram" not in out.stdout and "laplace" in out.stdout


def test_broken_distribution_is_reported_and_the_rest_loads(tmp_path):
    dist = tmp_path / "broken_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[privreg]\nbroken = broken_plugin_mod\n")
    (tmp_path / "broken_plugin_mod.py").write_text(
        textwrap.dedent("raise ImportError('requires the package frobnicate')\n")
    )
    env = _env(tmp_path)
    out = _privreg(env, "plugins")
    assert out.returncode == 0
    assert "plugin 'broken'" in out.stdout and "ImportError: requires the package frobnicate" in out.stdout
    assert "standard" in out.stdout
    out = _privreg(env, "list")
    assert out.returncode == 0 and "laplace" in out.stdout
    assert "warning: plugin 'broken'" in out.stderr


def test_template_event_is_charged_by_run_and_accounted_by_audit(installed_template, tmp_path):
    env = _env(installed_template)
    out = _privreg(
        env,
        "run",
        "template-histogram",
        "--column",
        "sex",
        "--epsilon",
        "0.5",
        "--budget-delta",
        "1e-6",
        "-o",
        str(tmp_path),
    )
    assert out.returncode == 0, out.stderr
    assert "epsilon spent: 0.5 of 0.5 (delta 1e-06)" in out.stdout
    out = _privreg(env, "audit", "--json", str(tmp_path / "ledger.sqlite"))
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    (release,) = report["releases"]
    assert release["event"] == {"kind": "template_geometric_histogram", "epsilon": 0.5}
    assert report["spent_epsilon"] == 0.5 and report["flags"] == []
    assert report["cumulative_epsilon"] == {"basic": [0.5]}
    nonadaptive = report["nonadaptive_epsilon"]
    assert nonadaptive["basic"] == 0.5 and nonadaptive["gdp"] is None  # through lower(): PureDP(0.5)
    # the plugin's zCDP handler: rho = 0.5 tanh(0.25), below the lowering's 0.5**2 / 2
    assert nonadaptive["zcdp"] == pytest.approx(zcdp_epsilon(0.5 * math.tanh(0.25), 1e-6))
    assert nonadaptive["zcdp"] < zcdp_epsilon(0.5**2 / 2, 1e-6)
