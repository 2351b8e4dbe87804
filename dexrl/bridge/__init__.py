"""dexrl.bridge."""
