"""Every hook a privreg plugin can implement, in one module.

A plugin is a module (or object) with functions decorated by ``privreg.hookimpl`` and
named after these specs; it is found through the ``privreg`` entry-point group::

    [project.entry-points.privreg]
    myplugin = "myplugin.hooks"

All hooks take no arguments and return a list. The registry calls every plugin's
implementation, tags each returned item with the plugin's name, and merges the lists;
names are unique across all kinds, and a name registered by two plugins is an error that
names both. A plugin whose hook raises, or returns anything but a list of the expected
items, is reported as failed and none of its items are registered; other plugins load.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("privreg")
hookimpl = pluggy.HookimplMarker("privreg")


@hookspec
def privreg_register_mechanisms():  # type: ignore[no-untyped-def]
    """Return a list of :class:`~privreg.core.items.RegistryItem` of kind ``mechanism``.

    Each factory builds a :class:`~privreg.core.mechanism.Mechanism` from the item's
    validated parameters. Results of all plugins are concatenated.
    """


@hookspec
def privreg_register_randomizers():  # type: ignore[no-untyped-def]
    """Return a list of ``RegistryItem`` of kind ``randomizer`` whose factories build
    :class:`~privreg.core.randomizer.Randomizer` objects. Results are concatenated."""


@hookspec
def privreg_register_sensitivities():  # type: ignore[no-untyped-def]
    """Return a list of ``RegistryItem`` of kind ``sensitivity`` whose factories build
    :class:`~privreg.core.sensitivity.Sensitivity` objects. Results are concatenated."""


@hookspec
def privreg_register_protocols():  # type: ignore[no-untyped-def]
    """Return a list of ``RegistryItem`` of kind ``protocol`` whose factories build
    :class:`~privreg.core.protocol.Protocol` objects. Results are concatenated."""


@hookspec
def privreg_register_workflows():  # type: ignore[no-untyped-def]
    """Return a list of ``RegistryItem`` of kind ``workflow``. The factory is the workflow
    itself: ``factory(context=WorkflowContext, **params) -> WorkflowResult``.
    Results are concatenated."""


@hookspec
def privreg_register_event_types():  # type: ignore[no-untyped-def]
    """Return a list of privacy event classes (decorated with ``privreg.core.event_type``)
    that the plugin defines, so ledgers holding them can be decoded. Results are
    concatenated; a ``kind`` tag claimed by two classes is an error."""


@hookspec
def privreg_register_accountants():  # type: ignore[no-untyped-def]
    """Return a list of :class:`~privreg.core.accounting.AccountingHandler` (how an
    existing accountant prices one release of the plugin's event type) and
    :class:`~privreg.core.accounting.AccountantType` (a new accountant class by name).

    Results of all plugins are concatenated and installed once the plugin loaded cleanly;
    a second handler for the same (accountant, event type), or a second accountant under
    the same name, fails that plugin. An event type without a handler is still accounted
    for by every accountant through its ``lower()`` guarantee, if it declares one.
    """


@hookspec
def privreg_register_deployments():  # type: ignore[no-untyped-def]
    """Return a list of :class:`~privreg.core.deployment.Deployment` instances: how the
    parties of a protocol run as separate processes (``privreg party``). Results are
    concatenated; a deployment name registered twice is an error naming both plugins."""


@hookspec
def privreg_demo_steps():  # type: ignore[no-untyped-def]
    """Return a list of :class:`~privreg.core.workflow.DemoStep` for ``privreg demo``.
    Steps of all plugins are concatenated and run sorted by ``(order, title)``."""


#: hook name -> the item kind it registers: the registry sets each returned item's kind.
REGISTRATION_HOOKS = {
    "privreg_register_mechanisms": "mechanism",
    "privreg_register_randomizers": "randomizer",
    "privreg_register_sensitivities": "sensitivity",
    "privreg_register_protocols": "protocol",
    "privreg_register_workflows": "workflow",
}
