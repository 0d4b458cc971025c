"""The plugin registry, built on pluggy.

Nothing is loaded at import time: :func:`load_registry` (or the cached
:func:`default_registry`) builds a plugin manager, loads the modules named in the
``privreg`` entry-point group -- built-in plugins register there too, so the core never
imports a plugin by name -- calls their hooks and merges what they register.

Environment variables (read when a registry is built):

* ``PRIVREG_DISABLE_PLUGIN_AUTOLOAD=1`` -- load no entry-point plugin, except those named
  in ``PRIVREG_PLUGINS``.
* ``PRIVREG_PLUGINS=a,b`` -- the allow-list: load only the entry points named ``a`` and
  ``b`` (a name that is not installed is reported as a failure).

A plugin that fails to import, to register or in one of its hooks is reported by name
with its cause (:attr:`Registry.failures`) and contributes nothing; the others load.
A name registered by two plugins raises :class:`DuplicateNameError` naming both.
"""

from __future__ import annotations

import difflib
import os
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import pluggy

from privreg.core import accounting, hookspecs
from privreg.core.deployment import Deployment
from privreg.core.errors import DuplicateNameError, PluginError, UnknownItemError
from privreg.core.events import EVENT_TYPES, PrivacyEvent
from privreg.core.items import ItemKind, RegistryItem
from privreg.core.workflow import DemoStep

if TYPE_CHECKING:
    # importlib.metadata loads email and socket: imported only when entry points are read
    import importlib.metadata as md

__all__ = [
    "ENTRY_POINT_GROUP",
    "DISABLE_AUTOLOAD_ENV",
    "PLUGINS_ENV",
    "PluginInfo",
    "PluginFailure",
    "Registry",
    "create_plugin_manager",
    "load_registry",
    "default_registry",
    "reset_default_registry",
]

ENTRY_POINT_GROUP = "privreg"
DISABLE_AUTOLOAD_ENV = "PRIVREG_DISABLE_PLUGIN_AUTOLOAD"
PLUGINS_ENV = "PRIVREG_PLUGINS"

_KIND_ORDER = {k: i for i, k in enumerate(ItemKind)}


@attrs.frozen(kw_only=True)
class PluginInfo:
    """A loaded plugin: its entry-point name, module and distribution."""

    name: str
    module: str
    distribution: str = ""
    version: str = ""


@attrs.frozen(kw_only=True)
class PluginFailure:
    """A plugin that did not load: where it came from, at which stage, and why."""

    name: str
    source: str
    stage: str
    error: str

    def __str__(self) -> str:
        return f"plugin {self.name!r} ({self.source}) failed at {self.stage}: {self.error}"


def create_plugin_manager() -> pluggy.PluginManager:
    """A plugin manager that knows privreg's hook specs and holds no plugins."""
    pm = pluggy.PluginManager("privreg")
    pm.add_hookspecs(hookspecs)
    return pm


def _describe_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _env_truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _env_list(name: str) -> list[str] | None:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return None
    return [x.strip() for x in raw.split(",") if x.strip()]


class Registry:
    """The merged view of everything the loaded plugins registered. Read-only."""

    def __init__(
        self,
        *,
        plugin_manager: pluggy.PluginManager,
        plugins: Iterable[PluginInfo],
        failures: Iterable[PluginFailure],
        items: Iterable[RegistryItem],
        event_types: Iterable[type[PrivacyEvent]],
        demo_steps: Iterable[DemoStep],
        deployments: Iterable[tuple[str, Deployment]] = (),
    ) -> None:
        self.plugin_manager = plugin_manager
        self.plugins = tuple(sorted(plugins, key=lambda p: p.name))
        self.failures = tuple(failures)
        self._items = {i.name: i for i in items}
        self.event_types = tuple(event_types)
        self._demo_steps = tuple(demo_steps)
        self._deployments: dict[str, tuple[str, Deployment]] = {}
        for plugin, dep in deployments:
            prior = self._deployments.get(dep.name)
            if prior is not None:
                raise DuplicateNameError(
                    f"deployment {dep.name!r} is registered twice: by plugin {prior[0]!r} and by plugin "
                    f"{plugin!r}. Uninstall one, or select plugins with {PLUGINS_ENV}=name1,name2."
                )
            self._deployments[dep.name] = (plugin, dep)

    def items(self, kind: ItemKind | str | None = None) -> tuple[RegistryItem, ...]:
        """All items (of one ``kind``), sorted by kind then name."""
        want = None if kind is None else ItemKind(kind)
        chosen = [i for i in self._items.values() if want is None or i.kind is want]
        return tuple(sorted(chosen, key=lambda i: (_KIND_ORDER[ItemKind(i.kind)], i.name)))

    def names(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.items())

    def get(self, name: str, kind: ItemKind | str | None = None) -> RegistryItem:
        """The item called ``name``; :class:`UnknownItemError` with suggestions otherwise."""
        item = self._items.get(name)
        want = None if kind is None else ItemKind(kind)
        if item is None or (want is not None and item.kind is not want):
            pool = [i.name for i in self.items(want)]
            close = difflib.get_close_matches(name, pool, n=3)
            what = want.value if want else "item"
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UnknownItemError(f"no {what} named {name!r} is registered{hint} (run 'privreg list' to see all)")
        return item

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def demo_steps(self) -> tuple[DemoStep, ...]:
        return tuple(sorted(self._demo_steps, key=lambda s: (s.order, s.title)))

    def deployments(self) -> tuple[Deployment, ...]:
        """Every registered deployment, sorted by name."""
        return tuple(self._deployments[name][1] for name in sorted(self._deployments))

    def deployment(self, name: str) -> Deployment:
        """The deployment called ``name``; :class:`UnknownItemError` with suggestions otherwise."""
        entry = self._deployments.get(name)
        if entry is None:
            close = difflib.get_close_matches(name, list(self._deployments), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UnknownItemError(
                f"no deployment named {name!r} is registered{hint} (run 'privreg party list' to see all)"
            )
        return entry[1]


def _dedupe_entry_points(
    eps: Iterable[md.EntryPoint],
) -> tuple[dict[str, md.EntryPoint], list[PluginFailure]]:
    chosen: dict[str, md.EntryPoint] = {}
    failures: list[PluginFailure] = []
    clashing: set[str] = set()
    for ep in eps:
        prior = chosen.get(ep.name)
        if prior is None:
            chosen[ep.name] = ep
        elif prior.value != ep.value:  # same value twice on sys.path is harmless
            clashing.add(ep.name)
            failures.append(
                PluginFailure(
                    name=ep.name,
                    source=f"{prior.value} and {ep.value}",
                    stage="lookup",
                    error="two installed distributions use this plugin name; uninstall one",
                )
            )
    for name in clashing:
        del chosen[name]
    return chosen, failures


def _dist_of(ep: md.EntryPoint) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "", ""
    return dist.metadata["Name"] or "", dist.version or ""


class _Collector:
    """Calls one plugin's hooks and validates what they return."""

    def __init__(self, pm: pluggy.PluginManager, name: str) -> None:
        self.pm = pm
        self.name = name

    def _impls(self, hook_name: str) -> list[Any]:
        caller = getattr(self.pm.hook, hook_name)
        return [i for i in caller.get_hookimpls() if i.plugin_name == self.name]

    def _call(self, hook_name: str) -> list[Any]:
        out: list[Any] = []
        for impl in self._impls(hook_name):
            result = impl.function()
            if not isinstance(result, (list, tuple)):
                raise PluginError(f"{hook_name} must return a list; got {type(result).__name__}")
            out.extend(result)
        return out

    def items(self) -> list[RegistryItem]:
        items: list[RegistryItem] = []
        for hook_name, kind in hookspecs.REGISTRATION_HOOKS.items():
            for item in self._call(hook_name):
                if not isinstance(item, RegistryItem):
                    raise PluginError(f"{hook_name} returned {item!r}, not a RegistryItem")
                # the hook says what the item is; an explicit kind may only agree with it
                if item.kind is not None and item.kind.value != kind:
                    raise PluginError(
                        f"{hook_name} returned {item.name!r} of kind {item.kind.value!r}; "
                        f"expected {kind!r}. Leave out kind=, or return the item from the "
                        f"hook of its kind"
                    )
                items.append(attrs.evolve(item, kind=kind, plugin=self.name))
        return items

    def event_types(self) -> list[type[PrivacyEvent]]:
        out = self._call("privreg_register_event_types")
        for cls in out:
            if not (isinstance(cls, type) and issubclass(cls, PrivacyEvent)) or EVENT_TYPES.get(cls.kind) is not cls:
                raise PluginError(
                    f"privreg_register_event_types returned {cls!r}: decorate event classes "
                    f"with privreg.core.event_type(KIND)"
                )
        return out

    def accounting(self) -> list[accounting.AccountingHandler | accounting.AccountantType]:
        out = self._call("privreg_register_accountants")
        for ext in out:
            if not isinstance(ext, (accounting.AccountingHandler, accounting.AccountantType)):
                raise PluginError(
                    f"privreg_register_accountants returned {ext!r}, not an AccountingHandler or AccountantType"
                )
        return out

    def deployments(self) -> list[Deployment]:
        out = self._call("privreg_register_deployments")
        for dep in out:
            if not isinstance(dep, Deployment) or not dep.name:
                raise PluginError(f"privreg_register_deployments returned {dep!r}, not a named Deployment")
        names = [d.name for d in out]
        if len(set(names)) != len(names):
            raise PluginError(f"privreg_register_deployments returned a name twice: {sorted(names)}")
        return out

    def demo_steps(self) -> list[DemoStep]:
        out = self._call("privreg_demo_steps")
        for step in out:
            if not isinstance(step, DemoStep):
                raise PluginError(f"privreg_demo_steps returned {step!r}, not a DemoStep")
        return out


def _unknown_hooks(plugin: object) -> list[str]:
    known = set(dir(hookspecs))
    return sorted(
        attr for attr in dir(plugin) if hasattr(getattr(plugin, attr, None), "privreg_impl") and attr not in known
    )


def load_registry(
    *,
    plugins: Mapping[str, object] | None = None,
    entry_points: Iterable[md.EntryPoint] | None = None,
    autoload: bool | None = None,
    allow: Iterable[str] | None = None,
) -> Registry:
    """Build a registry from entry-point plugins plus ``plugins`` given directly.

    ``entry_points`` defaults to the installed ``privreg`` group, ``autoload`` to the
    opposite of ``PRIVREG_DISABLE_PLUGIN_AUTOLOAD`` and ``allow`` to ``PRIVREG_PLUGINS``.
    """
    if autoload is None:
        autoload = not _env_truthy(DISABLE_AUTOLOAD_ENV)
    allow_list = list(allow) if allow is not None else _env_list(PLUGINS_ENV)
    if entry_points is None:
        import importlib.metadata

        entry_points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    available, failures = _dedupe_entry_points(entry_points)
    direct = dict(plugins or {})

    if allow_list is not None:
        for name in allow_list:
            if name not in available and name not in direct:
                failures.append(
                    PluginFailure(
                        name=name,
                        source=PLUGINS_ENV,
                        stage="lookup",
                        error=f"not installed; installed plugins: {sorted(available)}",
                    )
                )
        selected = [available[n] for n in allow_list if n in available]
    elif autoload:
        selected = list(available.values())
    else:
        selected = []

    pm = create_plugin_manager()
    loaded: list[tuple[str, object, PluginInfo]] = []
    for ep in sorted(selected, key=lambda e: e.name):
        try:
            module = ep.load()
        except Exception as exc:  # noqa: BLE001 -- isolate a failing plugin: report any import error, keep going
            failures.append(PluginFailure(name=ep.name, source=ep.value, stage="import", error=_describe_error(exc)))
            continue
        dist, version = _dist_of(ep)
        loaded.append((ep.name, module, PluginInfo(name=ep.name, module=ep.value, distribution=dist, version=version)))
    for name, obj in sorted(direct.items()):
        module_name = getattr(obj, "__name__", type(obj).__name__)
        loaded.append((name, obj, PluginInfo(name=name, module=module_name)))

    items: list[RegistryItem] = []
    events: list[type[PrivacyEvent]] = []
    steps: list[DemoStep] = []
    deployments: list[tuple[str, Deployment]] = []
    infos: list[PluginInfo] = []
    for name, obj, info in loaded:
        typos = _unknown_hooks(obj)
        if typos:
            failures.append(
                PluginFailure(
                    name=name,
                    source=info.module,
                    stage="register",
                    error=f"unknown hook(s) {typos}; see privreg.core.hookspecs for the names",
                )
            )
            continue
        try:
            pm.register(obj, name=name)
        except Exception as exc:  # noqa: BLE001 -- isolate a failing plugin: report it, keep going
            failures.append(PluginFailure(name=name, source=info.module, stage="register", error=_describe_error(exc)))
            continue
        collector = _Collector(pm, name)
        try:
            plugin_items = collector.items()
            plugin_events = collector.event_types()
            plugin_steps = collector.demo_steps()
            plugin_deployments = collector.deployments()
            accounting.install(collector.accounting(), plugin=name)
        except Exception as exc:  # noqa: BLE001 -- isolate a failing plugin: report it, keep going
            pm.unregister(name=name)
            failures.append(PluginFailure(name=name, source=info.module, stage="hooks", error=_describe_error(exc)))
            continue
        items.extend(plugin_items)
        events.extend(plugin_events)
        steps.extend(plugin_steps)
        deployments.extend((name, d) for d in plugin_deployments)
        infos.append(info)

    seen: dict[str, RegistryItem] = {}
    for item in items:
        prior = seen.get(item.name)
        if prior is not None:
            raise DuplicateNameError(
                f"name {item.name!r} is registered twice: as a {prior.kind_name} by plugin "
                f"{prior.plugin!r} and as a {item.kind_name} by plugin {item.plugin!r}. "
                f"Uninstall one, or select plugins with {PLUGINS_ENV}=name1,name2."
            )
        seen[item.name] = item
    return Registry(
        plugin_manager=pm,
        plugins=infos,
        failures=failures,
        items=items,
        event_types=events,
        demo_steps=steps,
        deployments=deployments,
    )


_default: Registry | None = None
_default_lock = threading.Lock()


def default_registry() -> Registry:
    """The registry of installed plugins, built on first use and then cached."""
    global _default
    with _default_lock:
        if _default is None:
            _default = load_registry()
        return _default


def reset_default_registry() -> None:
    """Forget the cached registry (after installing a plugin, or in tests)."""
    global _default
    with _default_lock:
        _default = None
