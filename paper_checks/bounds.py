"""Paper check: Theorem 5, Corollary 1 and Lemma 3 of the ICML paper on trained checkpoints.

Run alone: ``python paper_checks/bounds.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("bounds"))
