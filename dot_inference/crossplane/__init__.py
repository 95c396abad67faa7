"""What the `crossplane` CLI does offline: `crossplane composition render` (cmd/crank/render)."""
