"""Comparison reports: count and neural models on the same tokens."""
