"""What the function knows about models: catalog, the Hub, configs, KV cache, sizing."""
