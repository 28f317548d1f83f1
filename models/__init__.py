"""Flax models, data loaders, training and coded inference for codedjax.

Run from the checkout with ``python -m models.<module>``; this package is not installed.
"""
