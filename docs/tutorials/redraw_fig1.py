# %% [markdown]
# # Redraw Fig. 1 from the zoo, and add your own run
#
# The zoo keeps every paper-scale trial (`results/`): summaries, curves and final checkpoints. A
# figure is drawn from them without training.

# %%
import matplotlib.pyplot as plt

from spectral_analysis import tables

runs = tables.summary("fig1-addition")
runs = runs[runs["status"] == "done"]
final = runs.groupby(["variant", "axes.length"])["test_metrics.mse"].agg(["mean", "min", "max"])
final

# %%
fig, ax = plt.subplots(figsize=(6, 4))
for variant, group in final.groupby(level="variant"):
    lengths = group.index.get_level_values("axes.length")
    ax.plot(lengths, group["mean"], "o-", label=variant)
ax.axhline(0.167, color="black", ls=":", label="baseline (always 1)")
ax.set(xscale="log", yscale="log", xlabel="sequence length L", ylabel="test MSE (mean over 3 seeds)",
       title="ICML Fig. 1 from the kept paper-scale runs")
ax.legend(fontsize=8)

# %% [markdown]
# Your own run: train a model with the toolkit's trainer (a small Spectral-RNN here, so the notebook
# stays fast) and put its test MSE beside the zoo's.

# %%
import tempfile

from spectral_analysis.train import TrainConfig, train

sizes = {"length": 30, "train_size": 2000, "valid_size": 200, "test_size": 200}
result = train(TrainConfig(model="spectral", task="addition", out=tempfile.mkdtemp() + "/my-run", hidden=16,
                           steps=150, batch_size=32, model_options={"m1": 4, "m2": 4, "r": 0.1},
                           task_options=sizes, eval_every=1000, checkpoint_every=1000, progress=False))
mine = result["test"]["mse"]
ax.plot([30], [mine], "k*", ms=14, label=f"my run (n = 16, 150 steps): {mine:.3f}")
ax.legend(fontsize=8)
fig
