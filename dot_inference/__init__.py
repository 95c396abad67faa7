"""Offline tooling for dot-inference: render, validate, generate."""
