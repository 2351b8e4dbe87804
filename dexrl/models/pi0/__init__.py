"""Dexbotic π0 (``model_type: dexbotic_pi0``): config, network, loader and inference policy."""
