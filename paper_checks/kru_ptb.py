"""Paper check: KRU's character-level Penn Treebank claims (Table 3): oRNN generalizes worse than the other
models of its budget; KRU's bits per character come very close to the RNN's and the LSTM's.

Run alone: ``python paper_checks/kru_ptb.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("kru-ptb"))
