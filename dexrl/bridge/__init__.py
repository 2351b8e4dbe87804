"""dexrl's bridge to RLinf 0.3.0: the only package that imports ``rlinf``.

Registry, policy adapters, workers, launch and supervision; importing the package imports nothing
else. The module map is in docs/architecture.md.
"""
