"""Paper check: KRU's Eq. 3 (the gradient bound ||dL/dh_t|| <= ||W||^(T-t)) and Section 3.1's
"approximately unitary factors give an approximately unitary matrix", on random instances in float64.

Run alone: ``python paper_checks/kru_theory.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("kru-theory"))
