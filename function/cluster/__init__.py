"""Where a model runs: the target cluster, placement, the models beside it."""
