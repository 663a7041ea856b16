"""Paper check: the earlier version's Claim 1, Theorem 5 and Corollary 1.

Run alone: ``python paper_checks/linear_rnn_claims.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("linear-rnn"))
