"""Paper check: ICML Appendix C, Table 4 on the UCR datasets that ship offline: Spectral-RNN's bold test
accuracies, "Spectral-RNN is able to prevent overfitting", and its advantage growing with the depth.

Run alone: ``python paper_checks/ucr.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("ucr"))
