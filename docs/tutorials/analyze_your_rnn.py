# %% [markdown]
# # Analyze a PyTorch RNN you trained
#
# A model trained and saved with plain PyTorch, nothing of the toolkit involved, analyzed in a few
# lines: its per-matrix spectra, Theorem 5's bound, and a PAC-Bayes certificate of its error.

# %%
import torch
from torch import nn

torch.manual_seed(0)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(2, 16, nonlinearity="relu", batch_first=True)
        self.fc = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc(self.rnn(x)[0][:, -1])


# a toy task: the class is the sign pattern of the two inputs summed over 12 steps
x = torch.randn(600, 12, 2)
y = (x.sum(1)[:, 0] > 0).long() + (x.sum(1)[:, 1] > 0).long()
model = Classifier()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(150):
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
torch.save(model.state_dict(), "rnn1.pt")
print(f"training loss {loss.item():.3f}")

# %% [markdown]
# The per-matrix spectra of the module itself, one row per weight matrix under its own parameter name
# (WeightWatcher's columns beside the toolkit's: `spectral_norm` is WeightWatcher's `lambda_max`,
# `sigma_max^2`).

# %%
import spectral_analysis

spectral_analysis.spectra(model)[["name", "kind", "N", "M", "sigma_max", "sigma_min", "stable_rank",
                                  "spectral_margin"]]

# %% [markdown]
# `spectral_analysis.load` reads the saved state_dict (`weights_only`: no code runs), finds the
# recurrent weights and the head, and says what it assumed; the bounds and certificates read it.

# %%
subject = spectral_analysis.load("rnn1.pt", arch="rnn_relu")
print(subject.describe())

# %% [markdown]
# Theorem 5's complexity term on the training sequences: the sizes, the data bound B and the margin
# come from the data (`np.save`d arrays work the same from the command line: `spectral-analysis bound
# rnn1.pt --arch rnn_relu --inputs X.npy --labels y.npy`).

# %%
from spectral_analysis.analysis.bound_report import bound_report
from spectral_analysis.data.arrays import UserData

data = UserData(x, y, "the toy task")
report = bound_report(subject, user_data=data, margin=0.5)
print(f"log10 G(w) = {report['log10_G']:.1f}  (vacuous: the O-form is far above 1)")

# %% [markdown]
# A PAC-Bayes certificate: a Gaussian posterior Q centred on the trained weights (only its variances
# are fitted), its training error bounded by Monte Carlo and the PAC-Bayes-kl inequality. What it
# certifies is Q, a network drawn with that noise, and the record says so. An imported model records no
# initialization, so the prior is learned on half of the training set and the other half certifies
# (with 600 sequences the bound stays loose).

# %%
from spectral_analysis.analysis.certify import certify

task = data.as_task(subject.model.output_size)
record, _ = certify(subject, task.train.inputs, task.train.targets, prior="learned", prior_epochs=40,
                    epochs=10, mc_samples=3000, chunk_size=10)
print(f"certifies {record['certifies']}")
print(f"certified error <= {record['certified_error']:.3f} (Q's training error {record['mc_error']:.3f}, "
      f"KL {record['kl']:.1f}, m = {record['m']}; the network's own training error "
      f"{record['checkpoint_train_error']:.3f})")
