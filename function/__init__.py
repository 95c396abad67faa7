"""The LLMInference composition function."""
