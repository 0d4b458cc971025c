"""Which fields go into which Bloom filter, and how they are normalised (paper 004, Def. 2).

Every record gets two Bloom filters (Definition 2): ``bf`` over the *blocking* fields
(the paper: first + last name) and ``BF`` over the *matching* fields (the paper: the
postal address), both of length ``L = 100`` in the paper. A schema is written as a plain,
JSON-like dict and validated strictly by :func:`parse_schema`::

    {
        "blocking": {"fields": ["given_name", "surname"], "filter_length": 100, "hash_count": 2},
        "matching": {"fields": ["address_1", "suburb"], "filter_length": 100, "hash_count": 2},
        "q": 2,                 # q-gram size
        "padding": True,        # pad each value with q-1 '_' on both sides
        "normalise": {"lowercase": True, "strip": True,
                      "collapse_spaces": True, "drop_punctuation": True},
        "fields": {"surname": {"drop_punctuation": False}},   # per-field overrides
    }

Only ``blocking.fields`` and ``matching.fields`` are required. Unknown keys raise
:class:`PrivregValueError` naming the key and the allowed ones; wrong types raise
:class:`PrivregTypeError`. All parties must use the same schema (and the same secret).

``hash_count`` is ``k``, the number of filter positions per q-gram. The paper does not
give it. The defaults (2 for both filters) keep a 100-bit filter about 30-45 % full for
FEBRL names and addresses (15-30 distinct bigrams): a fuller filter loses the distance
information LSH needs, and a smaller ``k`` keeps the Hamming distance of a one-character
typo small (at most ``4 k`` bits: two q-grams lost, two gained).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = [
    "ROLES",
    "Normalisation",
    "FilterSpec",
    "Schema",
    "parse_schema",
    "FEBRL_SCHEMA",
    "PSEUDOPEOPLE_SCHEMA",
    "PSEUDOPEOPLE_NAMES_SCHEMA",
    "febrl_schema",
    "pseudopeople_schema",
]

#: Filter roles: ``blocking`` builds ``bf``, ``matching`` builds ``BF``.
ROLES = ("blocking", "matching")

_TOP_KEYS = ("blocking", "matching", "q", "padding", "normalise", "fields")
_FILTER_KEYS = ("fields", "filter_length", "hash_count")
_NORM_KEYS = ("lowercase", "strip", "collapse_spaces", "drop_punctuation")


def _bool(name: str) -> Any:
    def check(instance: Any, attribute: Any, value: Any) -> None:
        if not isinstance(value, bool):
            raise PrivregTypeError(f"{name}.{attribute.name} must be true or false; got {value!r}")

    return check


@attrs.frozen(kw_only=True)
class Normalisation:
    """How a field value is cleaned before q-gram extraction (applied in this order:
    missing -> '', lowercase, drop punctuation (keep letters, digits, spaces), strip,
    collapse runs of whitespace to one space)."""

    lowercase: bool = attrs.field(default=True, validator=_bool("normalise"))
    strip: bool = attrs.field(default=True, validator=_bool("normalise"))
    collapse_spaces: bool = attrs.field(default=True, validator=_bool("normalise"))
    drop_punctuation: bool = attrs.field(default=True, validator=_bool("normalise"))

    def to_dict(self) -> dict[str, bool]:
        return {k: getattr(self, k) for k in _NORM_KEYS}


def _fields(x: Any) -> tuple[str, ...]:
    if isinstance(x, str) or not isinstance(x, (list, tuple)):
        raise PrivregTypeError(f"fields must be a list of column names such as ['given_name', 'surname']; got {x!r}")
    out = tuple(x)
    if not out:
        raise PrivregValueError("fields must name at least one column; got []")
    for f in out:
        if not isinstance(f, str) or not f:
            raise PrivregTypeError(f"every field must be a non-empty str column name; got {f!r}")
    dupes = sorted({f for f in out if out.count(f) > 1})
    if dupes:
        raise PrivregValueError(f"fields lists {dupes} more than once; list each column once")
    return out


@attrs.frozen(kw_only=True)
class FilterSpec:
    """One Bloom filter: its fields, length ``L`` and hashes per q-gram ``k``."""

    role: str = attrs.field()
    fields: tuple[str, ...] = attrs.field(converter=_fields)
    filter_length: int = attrs.field(default=100)
    hash_count: int = attrs.field(default=2)

    @role.validator
    def _role(self, attribute: Any, value: Any) -> None:
        if value not in ROLES:
            raise PrivregValueError(f"role must be one of {list(ROLES)}; got {value!r}")

    @filter_length.validator
    def _length(self, attribute: Any, value: Any) -> None:
        x = v.check_int(f"{self.role}.filter_length", value, minimum=8)
        if x > 65536:
            raise PrivregValueError(f"{self.role}.filter_length must be <= 65536; got {x}")

    @hash_count.validator
    def _k(self, attribute: Any, value: Any) -> None:
        x = v.check_int(f"{self.role}.hash_count", value, minimum=1)
        if x > 64:
            raise PrivregValueError(f"{self.role}.hash_count must be <= 64; got {x}")

    def to_dict(self) -> dict[str, Any]:
        return {"fields": list(self.fields), "filter_length": self.filter_length, "hash_count": self.hash_count}


@attrs.frozen(kw_only=True)
class Schema:
    """A validated schema (build it with :func:`parse_schema`)."""

    blocking: FilterSpec
    matching: FilterSpec
    q: int = 2
    padding: bool = True
    normalise: Normalisation = Normalisation()
    overrides: Mapping[str, Normalisation] = attrs.field(factory=dict, hash=False)

    def __attrs_post_init__(self) -> None:
        if self.blocking.role != "blocking" or self.matching.role != "matching":
            raise PrivregValueError("Schema.blocking/matching must have roles 'blocking'/'matching'")
        q = v.check_int("q", self.q, minimum=1)
        if q > 8:
            raise PrivregValueError(f"q must be between 1 and 8 (2 = bigrams, as usual); got {q}")
        if not isinstance(self.padding, bool):
            raise PrivregTypeError(f"padding must be true or false; got {self.padding!r}")
        used = set(self.blocking.fields) | set(self.matching.fields)
        unknown = sorted(set(self.overrides) - used)
        if unknown:
            raise PrivregValueError(
                f"fields has normalisation overrides for {unknown}, which are not used by "
                f"blocking or matching; the used fields are {sorted(used)}"
            )

    def spec(self, role: str) -> FilterSpec:
        if role not in ROLES:
            raise PrivregValueError(f"role must be one of {list(ROLES)}; got {role!r}")
        return self.blocking if role == "blocking" else self.matching

    def normalisation(self, field: str) -> Normalisation:
        """The normalisation of ``field`` (its override, else the schema default)."""
        return self.overrides.get(field, self.normalise)

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column the schema reads, in first-use order."""
        return tuple(dict.fromkeys(self.blocking.fields + self.matching.fields))

    def to_dict(self) -> dict[str, Any]:
        """The JSON-like dict :func:`parse_schema` reads back to an equal schema."""
        return {
            "blocking": self.blocking.to_dict(),
            "matching": self.matching.to_dict(),
            "q": self.q,
            "padding": self.padding,
            "normalise": self.normalise.to_dict(),
            "fields": {f: n.to_dict() for f, n in self.overrides.items()},
        }


def _mapping(name: str, x: Any, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(x, Mapping):
        raise PrivregTypeError(f"{name} must be a dict; got {x!r} of type {type(x).__name__}")
    for key in x:
        if key not in allowed:
            raise PrivregValueError(f"{name} has unknown key {key!r}; allowed keys are {list(allowed)}")
    return x


def _norm(name: str, x: Any, base: Normalisation) -> Normalisation:
    m = _mapping(name, x, _NORM_KEYS)
    return attrs.evolve(base, **m)


def _filter(role: str, x: Any) -> FilterSpec:
    m = _mapping(role, x, _FILTER_KEYS)
    if "fields" not in m:
        raise PrivregValueError(f"{role} needs 'fields', the list of columns encoded into its filter")
    return FilterSpec(role=role, **m)


def parse_schema(spec: Mapping[str, Any] | Schema) -> Schema:
    """Validate a JSON-like schema dict (see the module docstring) into a frozen
    :class:`Schema`; a :class:`Schema` is returned unchanged."""
    if isinstance(spec, Schema):
        return spec
    m = _mapping("schema", spec, _TOP_KEYS)
    for role in ROLES:
        if role not in m:
            raise PrivregValueError(
                f"schema needs {role!r}, e.g. {{'{role}': {{'fields': [...]}}}}; got keys {sorted(m)}"
            )
    base = _norm("normalise", m.get("normalise", {}), Normalisation())
    overrides_in = m.get("fields", {})
    if not isinstance(overrides_in, Mapping):
        raise PrivregTypeError(f"schema 'fields' must map field names to normalisation dicts; got {overrides_in!r}")
    overrides = {str(f): _norm(f"fields.{f}", o, base) for f, o in overrides_in.items()}
    return Schema(
        blocking=_filter("blocking", m["blocking"]),
        matching=_filter("matching", m["matching"]),
        q=m.get("q", 2),
        padding=m.get("padding", True),
        normalise=base,
        overrides=overrides,
    )


def febrl_schema(*, filter_length: int = 100, block_hashes: int = 2, match_hashes: int = 2) -> Schema:
    """The default schema for FEBRL columns.

    Blocking: ``given_name`` + ``surname`` (the paper's first + last name). Matching:
    ``address_1`` (street) + ``suburb``: together they are the postal address the paper
    matches on. ``street_number``, ``postcode`` and ``address_2`` are left out: short
    digit strings give one or two bigrams each, so a single wrong digit changes a large
    share of their bits, and adding them pushes a 100-bit filter past ~50 % fill, where it
    stops separating non-matches."""
    return parse_schema(
        {
            "blocking": {
                "fields": ["given_name", "surname"],
                "filter_length": filter_length,
                "hash_count": block_hashes,
            },
            "matching": {"fields": ["address_1", "suburb"], "filter_length": filter_length, "hash_count": match_hashes},
        }
    )


def pseudopeople_schema(
    *, matching: str = "address", filter_length: int = 100, block_hashes: int = 2, match_hashes: int = 2
) -> Schema:
    """The default schema for the common columns of :func:`datasets.load_pseudopeople`.

    Blocking: ``first_name`` + ``last_name``. Matching: ``"address"`` uses
    ``street_address`` (number and street; the sample data's city and ZIP are constant,
    so they carry nothing); Social Security records have no address, so when SSA is a
    party use ``"names"`` (``first_name``, ``middle_initial``, ``last_name``: the only
    attributes census, SSA and W-2 share) or ``"dob"`` (census + SSA only)."""
    fields = {
        "address": ["street_address"],
        "names": ["first_name", "middle_initial", "last_name"],
        "dob": ["date_of_birth"],
    }
    if matching not in fields:
        raise PrivregValueError(f"matching must be one of {sorted(fields)}; got {matching!r}")
    return parse_schema(
        {
            "blocking": {
                "fields": ["first_name", "last_name"],
                "filter_length": filter_length,
                "hash_count": block_hashes,
            },
            "matching": {"fields": fields[matching], "filter_length": filter_length, "hash_count": match_hashes},
        }
    )


#: FEBRL columns: blocking on given_name + surname, matching on address_1 + suburb.
FEBRL_SCHEMA = febrl_schema()
#: pseudopeople common columns, matching on the street address (census, W-2).
PSEUDOPEOPLE_SCHEMA = pseudopeople_schema()
#: pseudopeople common columns, matching on names (any sources, including SSA).
PSEUDOPEOPLE_NAMES_SCHEMA = pseudopeople_schema(matching="names")
