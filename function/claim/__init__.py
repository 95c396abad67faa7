"""What a claim says: the LLMInference spec as plain data, one module per part."""
