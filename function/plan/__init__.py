"""What a model needs beyond GPUs: replicas and their budget, the model cache."""
