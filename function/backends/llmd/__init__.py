"""Backend llmd: llm-d serves the model through the Gateway API Inference Extension."""
