"""Example adapters of the Python runner (docs/plugins.md 15.5)."""
