"""Texts whose tokens depend on the Unicode semantics of the regex engine and of
lower-casing (Python's ``re``/``str.lower`` and Java's differ on several of them)."""

from __future__ import annotations

UNICODE_TEXTS = (
    "E = mc\u00b2 and x\u00b9\u00b2\u00b3 or \u00bd + \u00be of \u2153",  # superscripts, fractions
    "caf\u00e9 vs cafe\u0301, na\u00efve",  # precomposed vs combining acute (Mn)
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \u4e2d\u6587 \ud55c\uad6d\uc5b4",  # CJK, kana, hangul
    "ok \U0001f44d\U0001f3fd family \U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f1eb\U0001f1f7 done",  # emoji
    # Hebrew with points (marks), Arabic, right-to-left and left-to-right marks
    "\u05e9\u05b8\u05c1\u05dc\u05d5\u05b9\u05dd \u05e2\u05d5\u05dc\u05dd "
    "\u0645\u0631\u062d\u0628\u0627 \u200fRTL\u200e",
    "zero\u200bwidth join\u200dner non\u200cjoiner",  # ZWSP, ZWJ, ZWNJ
    "no\u00a0break\u202fnarrow",  # NBSP, narrow NBSP
    "\uff11\uff12\uff13 \uff21\uff22\uff23 \uff44\uff45\uff46",  # full-width digits and letters
    "\u039f\u0394\u039f\u03a3 \u0130stanbul \u01c5emal \u00df \u1e9e",  # final sigma, dotted I, titlecase, sharp s
    "\u2460\u2461 \u216b \u0663\u0664 \u096b\u096c a\u203fb snake_case it's",  # circled, roman, Indic digits, Pc
    "tab\there\nnew line",
    "",
)
