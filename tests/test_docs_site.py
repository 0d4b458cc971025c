"""The reference site (issue #29): its pages exist, no page shows raw reST, only the
built-in plugins are listed whatever else is installed, and the getting-started page
runs as written."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import pytest

from privreg.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
MKDOCS = Path(sys.executable).with_name("mkdocs")
HOOKS = ROOT / "docs" / "_hooks"
NEW_PAGES = (
    "getting-started/index.html",
    "analysis/index.html",
    "deploy/index.html",
    "api/analysis/index.html",
    "api/audit/index.html",
    "api/readers/index.html",
    "api/cli/index.html",
    "registry/index.html",
)
# raw reST a reader must never see: roles and double-backtick literals
REST_MARKERS = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj):`|``")

INTRUDER = '''
import privreg
from privreg import Citation, Example, Param, RegistryItem


def _sens(*, value):
    """A sensitivity from outside the project."""
    return privreg.GlobalSensitivity(value=value)


@privreg.hookimpl
def privreg_register_sensitivities():
    return [RegistryItem(name="intruder-sensitivity", kind="sensitivity", summary="not privreg's",
                         citation=Citation(authors="Someone Else", title="Elsewhere", year=2026),
                         factory=_sens, example=Example(params={"value": 1.0}),
                         params=(Param(name="value", type=float, doc="the bound"),))]
'''


def _hook(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(f"privreg_docs_test_{name}", HOOKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Text(HTMLParser):
    """The visible text of a page: no tags, scripts or styles."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self._hidden += tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self._hidden -= tag in ("script", "style")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def visible_text(page: Path) -> str:
    parser = _Text()
    parser.feed(page.read_text())
    return html.unescape("".join(parser.parts))


def _install_intruder(where: Path) -> None:
    """A plugin installed outside the project: a module and a dist-info whose entry point
    is in the ``privreg`` group, found on ``where`` through PYTHONPATH."""
    (where / "privreg_intruder_plugin.py").write_text(textwrap.dedent(INTRUDER))
    dist = where / "privreg_intruder-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: privreg-intruder\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[privreg]\nintruder = privreg_intruder_plugin\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("docs")
    _install_intruder(tmp)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp)])}
    env.pop("PRIVREG_PLUGINS", None)  # every installed plugin loads, as on a user's machine
    # the intruder loads and registers there: were the site built from what is installed, it would show
    probe = "import privreg; print(privreg.default_registry().names())"
    names = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert "intruder-sensitivity" in names.stdout
    out = tmp / "site"
    subprocess.run(
        [str(MKDOCS), "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return out


@pytest.mark.slow
def test_new_pages_exist(site: Path) -> None:
    for page in NEW_PAGES:
        assert (site / page).is_file(), page
    cli = visible_text(site / "api" / "cli" / "index.html")
    assert "parse_workflow_args" in cli and "cmd_ledger_verify" in cli and "cmd_audit_mechanism" in cli
    assert "Query" in visible_text(site / "api" / "analysis" / "index.html")


@pytest.mark.slow
def test_no_page_shows_raw_rest(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 15
    shown = {str(p.relative_to(site)): REST_MARKERS.findall(visible_text(p)) for p in pages}
    assert {page: found for page, found in shown.items() if found} == {}
    # the roles were converted, not dropped: the registry's literals are code
    registry = (site / "registry" / "index.html").read_text()
    assert "<code>epsilon</code>" in registry


@pytest.mark.slow
def test_only_builtin_plugins_are_listed(site: Path) -> None:
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert "intruder" not in text, page
    registry = visible_text(site / "registry" / "index.html")
    for plugin in ("standard", "heavy_hitters", "ngrams", "outliers", "spam", "pprl"):
        assert plugin in registry


@pytest.mark.slow
def test_registry_tables_wrap_to_the_page(site: Path) -> None:
    registry = (site / "registry" / "index.html").read_text()
    assert "css/privreg.css" in registry
    css = (site / "css" / "privreg.css").read_text()
    assert re.search(r"td,\s*\.wy-table-responsive table th \{\s*white-space: normal;", css)


def test_registry_page_reads_the_projects_own_plugins() -> None:
    """The built-in list is pyproject's, not the installed distributions'."""
    declared = {ep.name for ep in _hook("registry_page").builtin_entry_points()}
    assert declared == {"standard", "heavy_hitters", "ngrams", "outliers", "spam", "pprl"}


@pytest.mark.parametrize(
    ("rest", "markdown"),
    [
        (":func:`~privreg.budget.runs.run_workflow`", "`run_workflow`"),
        (":class:`PrivacyBudget`", "`PrivacyBudget`"),
        (":meth:`the session <privreg.budget.BudgetSession.open>`", "`the session`"),
        ("``epsilon`` and ``a `b` c``", "`epsilon` and ``a `b` c``"),
        ("2**53 and 2**-10", "2\\*\\*53 and 2\\*\\*-10"),
        ("**strong** and *emphasis*", "**strong** and *emphasis*"),
        ("keys like <name>", "keys like &lt;name>"),
        ("Example::\n\n    x = ``1``", "Example:\n\n    x = ``1``"),
        (
            "====  ======\n``a``  first\n      more\n``b``  second\n====  ======",
            "\n|  |  |\n|---|---|\n| `a` | first more |\n| `b` | second |\n",
        ),
    ],
)
def test_rest_to_markdown(rest: str, markdown: str) -> None:
    assert _hook("rest_markup").to_markdown(rest) == markdown


def _blocks(page: Path) -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", page.read_text(), flags=re.S)


def test_getting_started_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """Its Python blocks run in order in one namespace, its console lines through the CLI,
    each exiting 0; the shared ledger then holds both programs' releases."""
    monkeypatch.chdir(tmp_path)
    blocks = _blocks(ROOT / "docs" / "getting-started.md")
    assert [kind for kind, _ in blocks] == ["bash", "python", "console", "python", "console"]
    namespace: dict[str, object] = {}
    for kind, code in blocks:
        if kind == "python":
            exec(compile(code, "getting-started.md", "exec"), namespace)  # noqa: S102 -- the page's own code
        elif kind == "console":
            for line in code.strip().splitlines():
                argv = shlex.split(line.removeprefix("$ "))
                assert argv[0] == "privreg"
                assert main(argv[1:]) == 0, (line, capsys.readouterr().err)
    out = capsys.readouterr().out
    assert "count = " in out and "mean(age) = " in out
    # the Python count (0.5) and the workflow's two releases (0.25 each) on one budget of 2
    assert "ledger team.sqlite: 3 release(s)" in out
    assert "spent (under the rule): 1   remaining: 1" in out and "flags: none" in out


def test_analysis_guide_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = [code for kind, code in _blocks(ROOT / "docs" / "analysis.md") if kind == "python"]
    assert len(blocks) == 1
    exec(compile(blocks[0], "analysis.md", "exec"), {})  # noqa: S102 -- the page's own code
    out = capsys.readouterr().out
    assert "count = " in out and "count by education = " in out and "quantile[0.5](age) = " in out
