"""Paper check: KRU's Table 4 (JSB Chorales) claim that KRU overfits less and generalizes better than
the RNN and LSTM baselines.

Run alone: ``python paper_checks/kru_music.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("kru-music"))
