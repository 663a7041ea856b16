"""Paper check: KRU's Fig. 6 claims that a larger soft-unitary amplitude brings the recurrent matrix
closer to the unitary set and that JSB Chorales validates best at amplitude 1e-2.

Run alone: ``python paper_checks/kru_amplitude.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("kru-amplitude"))
