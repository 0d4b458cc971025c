"""The plugin registry: entry points, failure isolation, duplicates, env variables."""

import importlib.metadata as md
import subprocess
import sys
import textwrap

import pytest

import privreg
from privreg import DuplicateNameError, UnknownItemError
from privreg.core.registry import DISABLE_AUTOLOAD_ENV, PLUGINS_ENV, load_registry

STANDARD = md.EntryPoint(name="standard", value="privreg.plugins.standard.hooks", group="privreg")

GOOD = """
import privreg
from privreg import Citation, Example, Param, RegistryItem

CIT = Citation(authors="A. Author", title="A Title", year=2020)

def _sens(*, value):
    '''A declared sensitivity.'''
    return privreg.GlobalSensitivity(value=value)

@privreg.hookimpl
def privreg_register_sensitivities():
    return [RegistryItem(name="{name}", kind="sensitivity", summary="test item", citation=CIT,
                         factory=_sens, example=Example(params={{"value": 1.0}}),
                         params=(Param(name="value", type=float, doc="the bound"),))]
"""


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(module: str, source: str) -> md.EntryPoint:
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
        return md.EntryPoint(name=module, value=module, group="privreg")

    yield write
    for name in list(sys.modules):
        if name.startswith("plug_"):
            del sys.modules[name]


def test_builtin_plugin_loads_through_its_entry_point():
    registry = load_registry(entry_points=[STANDARD])
    assert [p.name for p in registry.plugins] == ["standard"]
    assert registry.get("laplace").plugin == "standard"
    assert registry.failures == ()


def test_installed_entry_points_include_the_builtin_plugin():
    names = {ep.name for ep in md.entry_points(group="privreg")}
    assert "standard" in names
    assert "standard" in {p.name for p in privreg.default_registry().plugins}


def test_import_failure_is_reported_and_others_still_load(plugin_dir):
    broken = plugin_dir("plug_broken", "raise ImportError('needs the frobnicate package')")
    registry = load_registry(entry_points=[STANDARD, broken])
    (failure,) = registry.failures
    assert failure.name == "plug_broken" and failure.stage == "import"
    assert "ImportError: needs the frobnicate package" in str(failure)
    assert "laplace" in registry


def test_hook_that_raises_fails_only_its_plugin(plugin_dir):
    ep = plugin_dir(
        "plug_raises",
        """
        import privreg
        @privreg.hookimpl
        def privreg_register_mechanisms():
            raise RuntimeError("boom")
    """,
    )
    registry = load_registry(entry_points=[STANDARD, ep])
    assert [(f.name, f.stage) for f in registry.failures] == [("plug_raises", "hooks")]
    assert "RuntimeError: boom" in registry.failures[0].error
    assert [p.name for p in registry.plugins] == ["standard"]


def test_partial_registration_is_all_or_nothing(plugin_dir):
    ep = plugin_dir(
        "plug_half",
        GOOD.format(name="half-good")
        + textwrap.dedent("""
        @privreg.hookimpl
        def privreg_register_workflows():
            return ["not an item"]
    """),
    )
    registry = load_registry(entry_points=[ep])
    assert "half-good" not in registry
    assert "not a RegistryItem" in registry.failures[0].error


def test_item_returned_from_the_wrong_hook_is_refused(plugin_dir):
    ep = plugin_dir(
        "plug_wrongkind",
        GOOD.format(name="x1").replace("privreg_register_sensitivities", "privreg_register_mechanisms"),
    )
    registry = load_registry(entry_points=[ep])
    assert "expected 'mechanism'" in registry.failures[0].error


def test_misspelled_hook_is_reported(plugin_dir):
    ep = plugin_dir(
        "plug_typo",
        """
        import privreg
        @privreg.hookimpl
        def privreg_register_mechanism():
            return []
    """,
    )
    registry = load_registry(entry_points=[ep])
    assert registry.failures[0].stage == "register"
    assert "privreg_register_mechanism" in registry.failures[0].error


def test_duplicate_names_name_both_plugins(plugin_dir):
    a = plugin_dir("plug_a", GOOD.format(name="same-name"))
    b = plugin_dir("plug_b", GOOD.format(name="same-name"))
    with pytest.raises(DuplicateNameError) as info:
        load_registry(entry_points=[a, b])
    assert "'plug_a'" in str(info.value) and "'plug_b'" in str(info.value)
    assert PLUGINS_ENV in str(info.value)


def test_duplicate_of_a_builtin_name_is_refused(plugin_dir):
    ep = plugin_dir("plug_dup", GOOD.format(name="laplace"))
    with pytest.raises(DuplicateNameError, match="standard"):
        load_registry(entry_points=[STANDARD, ep])


def test_two_distributions_claiming_one_plugin_name_load_neither():
    other = md.EntryPoint(name="standard", value="somewhere.else", group="privreg")
    registry = load_registry(entry_points=[STANDARD, other])
    assert registry.plugins == ()
    assert registry.failures[0].stage == "lookup"


def test_same_entry_point_twice_on_the_path_is_harmless():
    registry = load_registry(entry_points=[STANDARD, STANDARD])
    assert [p.name for p in registry.plugins] == ["standard"] and registry.failures == ()


def test_disable_autoload_loads_nothing(monkeypatch, plugin_dir):
    monkeypatch.setenv(DISABLE_AUTOLOAD_ENV, "1")
    ep = plugin_dir("plug_c", GOOD.format(name="c-item"))
    registry = load_registry(entry_points=[STANDARD, ep])
    assert registry.plugins == () and registry.items() == ()


def test_allow_list_selects_plugins_even_without_autoload(monkeypatch, plugin_dir):
    monkeypatch.setenv(DISABLE_AUTOLOAD_ENV, "1")
    monkeypatch.setenv(PLUGINS_ENV, "plug_d")
    ep = plugin_dir("plug_d", GOOD.format(name="d-item"))
    registry = load_registry(entry_points=[STANDARD, ep])
    assert [p.name for p in registry.plugins] == ["plug_d"]
    assert "laplace" not in registry


def test_allow_list_reports_plugins_that_are_not_installed(monkeypatch):
    monkeypatch.setenv(PLUGINS_ENV, "standard, nosuchplugin")
    registry = load_registry(entry_points=[STANDARD])
    assert [p.name for p in registry.plugins] == ["standard"]
    assert registry.failures[0].name == "nosuchplugin"
    assert "not installed" in registry.failures[0].error


def test_plugins_can_be_passed_directly(template_on_path):
    from privreg_template import hooks

    registry = load_registry(plugins={"template": hooks}, autoload=False)
    assert {i.name for i in registry.items()} == {"template-histogram-mechanism", "template-histogram"}


def test_event_types_hook(plugin_dir):
    ep = plugin_dir(
        "plug_ev",
        """
        import attrs, privreg
        from privreg.core.events import EVENT_TYPES

        @privreg.event_type("plug-ev-test")
        @attrs.frozen(kw_only=True)
        class MyEvent(privreg.PrivacyEvent):
            x: float = 1.0

        @privreg.hookimpl
        def privreg_register_event_types():
            return [MyEvent]
    """,
    )
    from privreg.core.events import EVENT_TYPES

    try:
        registry = load_registry(entry_points=[ep])
        (cls,) = registry.event_types
        assert privreg.event_from_json(cls(x=2.0).to_json()) == cls(x=2.0)
    finally:
        EVENT_TYPES.pop("plug-ev-test", None)


def test_undecorated_event_class_is_refused(plugin_dir):
    ep = plugin_dir(
        "plug_ev2",
        """
        import privreg
        class NotRegistered(privreg.PrivacyEvent):
            kind = "unregistered"
        @privreg.hookimpl
        def privreg_register_event_types():
            return [NotRegistered]
    """,
    )
    registry = load_registry(entry_points=[ep])
    assert "event_type" in registry.failures[0].error


def test_unknown_names_get_suggestions():
    registry = load_registry(entry_points=[STANDARD])
    with pytest.raises(UnknownItemError, match="did you mean laplace"):
        registry.get("laplac")
    with pytest.raises(UnknownItemError, match="no workflow named 'laplace'"):
        registry.get("laplace", kind="workflow")


def test_default_registry_is_cached_until_reset():
    first = privreg.default_registry()
    assert privreg.default_registry() is first
    privreg.reset_default_registry()
    assert privreg.default_registry() is not first


def test_importing_privreg_loads_no_plugin():
    code = (
        "import sys, privreg, privreg.cli.main; "
        "print(sorted(m for m in sys.modules if m.startswith('privreg.plugins')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_demo_steps_are_sorted_across_plugins():
    steps = load_registry(entry_points=[STANDARD]).demo_steps()
    assert steps and [s.order for s in steps] == sorted(s.order for s in steps)
