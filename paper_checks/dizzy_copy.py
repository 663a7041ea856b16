"""Paper check: DizzyRNN's Fig. 1 claim that DizzyRNN reaches near-perfect accuracy on the copy problem
(lag 90) in under 100 epochs while RNN, IRNN and LSTM fail or plateau low.

Run alone: ``python paper_checks/dizzy_copy.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("dizzy"))
