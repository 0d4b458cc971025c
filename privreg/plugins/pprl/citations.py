"""The papers the ``pprl`` plugin implements or relies on."""

from privreg.core.items import Citation

#: Paper 004 (in Chinese; English title and author names as on the journal's page).
TONG19 = Citation(
    authors="D. Tong, D. Shen, S. Han, T. Nie, Y. Kou, G. Yu",
    title="Multi-Party Strong-Privacy-Preserving Record Linkage Method (MP-SPPRL)",
    year=2019,
    venue="Journal of Frontiers of Computer Science and Technology 13(3):394-407, doi:10.3778/j.issn.1673-9418.1807047",
    where="Definitions 1-3; Section 4 (double blocking: Hamming LSH + suffix blocking; 4.2.2 "
    "block dispersion, formulas (1)-(3); sliding-window merge, Fig. 6); Algorithm 1; "
    "Section 5 metrics, formulas (4)-(5)",
    url="http://fcst.ceaj.org/CN/abstract/abstract1732.shtml",
)

#: Bloom-filter encoding of q-grams for PPRL, which paper 004 builds on.
SCHNELL09 = Citation(
    authors="R. Schnell, T. Bachteler, J. Reiher",
    title="Privacy-preserving record linkage using Bloom filters",
    year=2009,
    venue="BMC Medical Informatics and Decision Making 9:41, doi:10.1186/1472-6947-9-41",
    where="Bloom filters of q-gram sets with keyed (HMAC) hash functions",
)

#: HKDF, used to derive every key from the parties' shared secret.
RFC5869 = Citation(
    authors="H. Krawczyk, P. Eronen",
    title="HMAC-based Extract-and-Expand Key Derivation Function (HKDF)",
    year=2010,
    venue="IETF RFC 5869",
    where="Section 2 (extract, expand); Appendix A test cases 1-3",
    url="https://www.rfc-editor.org/rfc/rfc5869",
)
