"""A researcher's plain PyTorch: train nn.RNN / nn.GRU / nn.LSTM with an nn.Linear head for a few
steps on a toy sequence task and save them with torch.save and safetensors. No toolkit import."""

import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn


class Classifier(nn.Module):
    def __init__(self, cell: str, layers: int = 1) -> None:
        super().__init__()
        options = {"nonlinearity": "relu"} if cell == "RNN" else {}
        self.rnn = getattr(nn, cell)(2, 16, num_layers=layers, batch_first=True, **options)
        self.fc = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return self.fc(out[:, -1])


def main(out: Path) -> None:
    torch.manual_seed(0)
    x = torch.randn(96, 12, 2)
    y = (x[:, -1, 0] > -0.5).long() + (x[:, -1, 0] > 0.5).long()  # read off the last step
    np.save(out / "inputs.npy", x.numpy())
    np.save(out / "labels.npy", y.numpy())
    for cell, layers in (("RNN", 1), ("GRU", 1), ("LSTM", 1), ("RNN", 2)):
        model = Classifier(cell, layers)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(30):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        name = f"{cell.lower()}{layers}"
        torch.save(model.state_dict(), out / f"{name}.pt")
        save_file(model.state_dict(), str(out / f"{name}.safetensors"))
        torch.save(model(x[:4]).detach(), out / f"{name}_logits.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
