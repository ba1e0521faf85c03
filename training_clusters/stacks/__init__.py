"""Stack classes: each composes constructs into one complete training environment."""

from __future__ import annotations

from training_clusters.stacks.base import TrainingEnvironmentStack

__all__ = ["TrainingEnvironmentStack"]
