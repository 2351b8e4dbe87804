"""Helpers for tests and ``--smoke``: tiny checkpoints in the real Dexbotic layout.

``dexrl.testing.tiny_pi0.write_tiny_pi0`` writes a random π0 directory; ``dexrl.testing.files``
writes its tokenizer, preprocessor config and norm stats. ``dexrl.testing.learning`` holds the
learning check's contextual task and its PPO run.
"""
