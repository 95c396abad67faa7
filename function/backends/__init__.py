"""How a plan becomes objects: one module per backend, behind one interface."""
