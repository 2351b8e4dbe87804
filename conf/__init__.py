"""dexrl's Hydra config tree (YAML only; this file makes it an importable resource package)."""
