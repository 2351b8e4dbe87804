"""Checkpoints as dexrl meets them: what a path given on the command line is, and loading
its policy."""
