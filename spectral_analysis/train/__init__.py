"""Training layer: the trainer, its recorders, and checkpoint read/write (safetensors, no pickle)."""

from spectral_analysis.train.checkpoint import (
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    read_checkpoint,
    save_checkpoint,
)
from spectral_analysis.train.config import OPTIMIZERS, TrainConfig
from spectral_analysis.train.recorders import spectral_margin, weight_singular_values
from spectral_analysis.train.trainer import Trainer, TrainingDivergedError, train

__all__ = ["OPTIMIZERS", "Checkpoint", "CheckpointError", "TrainConfig", "Trainer", "TrainingDivergedError",
           "load_checkpoint", "read_checkpoint", "save_checkpoint", "spectral_margin", "train",
           "weight_singular_values"]
