"""Paper check: KRU's copy (Fig. 1) and adding (Fig. 2) claims: KRU reaches zero cross entropy on copy while
RNN and LSTM stay at the memoryless baseline; KRU has the lowest adding MSE and, with the LSTM, learns it.

Run alone: ``python paper_checks/kru_synthetic.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("kru-synthetic"))
