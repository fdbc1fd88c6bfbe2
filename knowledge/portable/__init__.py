"""Portable bases: export and import a base with its vectors, back up and restore a data directory,
diagnose a damaged one, and keep all of it private to its owner. See each module for its contract."""
