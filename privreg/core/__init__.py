"""privreg's core: the four interfaces, privacy events, the registry and its hook specs.

Importing this package loads no plugin (call :func:`default_registry` for that) and no
networking code: protocols are run by :mod:`privreg.mpc`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privreg.core.charging import Charge, Charger, EventLog
    from privreg.core.errors import (
        BudgetExceededError,
        DeadlockError,
        DuplicateNameError,
        PluginError,
        PrivregError,
        PrivregTypeError,
        PrivregValueError,
        ProtocolError,
        SerializationError,
        UnknownItemError,
        UnsupportedEventError,
    )
    from privreg.core.events import (
        ZCDP,
        ApproxDP,
        Composed,
        DiscreteGaussian,
        DiscreteLaplace,
        Exponential,
        Gaussian,
        Laplace,
        LocalDP,
        NoPrivacyLoss,
        PoissonSampled,
        PrivacyEvent,
        PureDP,
        SampledWithoutReplacement,
        SelfComposed,
        Shuffled,
        event_from_dict,
        event_from_json,
        event_type,
    )
    from privreg.core.hookspecs import hookimpl
    from privreg.core.items import REQUIRED, Citation, Example, ItemKind, Param, RegistryItem
    from privreg.core.mechanism import Mechanism, Release
    from privreg.core.params import OPEN_UNIT, POSITIVE, Spec, check_params, param_field, param_fields, params_of
    from privreg.core.protocol import Channel, Party, Protocol
    from privreg.core.randomizer import FrequencyEstimate, Randomizer, Reports
    from privreg.core.randomness import InsecureReproducibleRandom, RandomSource, SecureRandom
    from privreg.core.registry import Registry, default_registry, load_registry, reset_default_registry
    from privreg.core.sensitivity import (
        GlobalSensitivity,
        LocalSensitivity,
        Norm,
        Sensitivity,
        SensitivityKind,
        SmoothSensitivity,
    )
    from privreg.core.workflow import DemoStep, WorkflowContext, WorkflowResult

__all__ = [
    # the four interfaces and what they return
    "Mechanism",
    "Release",
    "Randomizer",
    "Reports",
    "FrequencyEstimate",
    "Sensitivity",
    "SensitivityKind",
    "GlobalSensitivity",
    "LocalSensitivity",
    "SmoothSensitivity",
    "Norm",
    "Protocol",
    "Party",
    "Channel",
    # privacy events
    "PrivacyEvent",
    "PureDP",
    "ApproxDP",
    "ZCDP",
    "LocalDP",
    "NoPrivacyLoss",
    "Laplace",
    "Gaussian",
    "DiscreteLaplace",
    "DiscreteGaussian",
    "Exponential",
    "Composed",
    "SelfComposed",
    "PoissonSampled",
    "SampledWithoutReplacement",
    "Shuffled",
    "event_type",
    "event_from_dict",
    "event_from_json",
    # charging releases
    "Charge",
    "Charger",
    "EventLog",
    # randomness
    "RandomSource",
    "SecureRandom",
    "InsecureReproducibleRandom",
    # the registry, its items and plugin hooks
    "Registry",
    "default_registry",
    "load_registry",
    "reset_default_registry",
    "RegistryItem",
    "ItemKind",
    "Param",
    "REQUIRED",
    "Spec",
    "param_field",
    "param_fields",
    "params_of",
    "check_params",
    "POSITIVE",
    "OPEN_UNIT",
    "Citation",
    "Example",
    "hookimpl",
    "DemoStep",
    "WorkflowContext",
    "WorkflowResult",
    # errors
    "PrivregError",
    "PrivregValueError",
    "PrivregTypeError",
    "BudgetExceededError",
    "UnsupportedEventError",
    "PluginError",
    "DuplicateNameError",
    "UnknownItemError",
    "ProtocolError",
    "DeadlockError",
    "SerializationError",
]

# Each name is imported from its module on first use (PEP 562): importing privreg, or one
# module of it, loads neither numpy nor the rest of core (the CLI's start-up,
# benchmarks/startup.py). The imports above say the same for type checkers and readers.
_MODULE_OF: dict[str, str] = {
    **dict.fromkeys(("Charge", "Charger", "EventLog"), "charging"),
    **dict.fromkeys(
        (
            "BudgetExceededError",
            "DeadlockError",
            "DuplicateNameError",
            "PluginError",
            "PrivregError",
            "PrivregTypeError",
            "PrivregValueError",
            "ProtocolError",
            "SerializationError",
            "UnknownItemError",
            "UnsupportedEventError",
        ),
        "errors",
    ),
    **dict.fromkeys(
        (
            "ZCDP",
            "ApproxDP",
            "Composed",
            "DiscreteGaussian",
            "DiscreteLaplace",
            "Exponential",
            "Gaussian",
            "Laplace",
            "LocalDP",
            "NoPrivacyLoss",
            "PoissonSampled",
            "PrivacyEvent",
            "PureDP",
            "SampledWithoutReplacement",
            "SelfComposed",
            "Shuffled",
            "event_from_dict",
            "event_from_json",
            "event_type",
        ),
        "events",
    ),
    **dict.fromkeys(("hookimpl",), "hookspecs"),
    **dict.fromkeys(("REQUIRED", "Citation", "Example", "ItemKind", "Param", "RegistryItem"), "items"),
    **dict.fromkeys(("Mechanism", "Release"), "mechanism"),
    **dict.fromkeys(
        ("OPEN_UNIT", "POSITIVE", "Spec", "check_params", "param_field", "param_fields", "params_of"), "params"
    ),
    **dict.fromkeys(("Channel", "Party", "Protocol"), "protocol"),
    **dict.fromkeys(("FrequencyEstimate", "Randomizer", "Reports"), "randomizer"),
    **dict.fromkeys(("InsecureReproducibleRandom", "RandomSource", "SecureRandom"), "randomness"),
    **dict.fromkeys(("Registry", "default_registry", "load_registry", "reset_default_registry"), "registry"),
    **dict.fromkeys(
        ("GlobalSensitivity", "LocalSensitivity", "Norm", "Sensitivity", "SensitivityKind", "SmoothSensitivity"),
        "sensitivity",
    ),
    **dict.fromkeys(("DemoStep", "WorkflowContext", "WorkflowResult"), "workflow"),
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
