"""Paper check: ICML Table 3's claims on Penn Treebank, that Spectral-RNN beats the LSTM with about half
the parameters and that the 2-layer Spectral-RNN has a lower test and a higher training perplexity.

Run alone: ``python paper_checks/ptb.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("ptb"))
