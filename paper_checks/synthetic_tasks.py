"""Paper check: Section 7.1's readings of Fig. 1 (addition) and Fig. 2 (copy) against the tasks'
baselines and each other, from the kept paper-scale results.

Run alone: ``python paper_checks/synthetic_tasks.py [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("synthetic-tasks"))
