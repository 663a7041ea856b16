"""Paper check: Theorems 1-4 and Lemma 1 of the ICML paper and the proof of Theorem 3.

Run alone: ``python paper_checks/svd_map_theorems.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("svd-map"))
