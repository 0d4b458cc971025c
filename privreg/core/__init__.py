"""privreg's core: the four interfaces, privacy events, the registry and its hook specs.

Importing this package loads no plugin; call :func:`default_registry` for that.
"""

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
from privreg.core.protocol import (
    Channel,
    InMemoryTransport,
    Party,
    Protocol,
    ProtocolResult,
    Traffic,
    Transcript,
    Transport,
    count_ciphertexts,
)
from privreg.core.transport_tcp import TcpTransport
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

import types as _types

__all__ = [
    _n for _n, _v in list(globals().items())
    if not _n.startswith("_") and not isinstance(_v, _types.ModuleType)
]
