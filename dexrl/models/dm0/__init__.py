"""Dexbotic DM0 (``model_type: dexbotic_dm0``): config, PE vision tower, network, loader,
tokenizer and inference policy."""
