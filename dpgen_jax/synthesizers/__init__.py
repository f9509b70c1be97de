"""Synthesizers: one module per method."""
