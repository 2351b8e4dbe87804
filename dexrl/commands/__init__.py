"""One module per verb; each exposes ``mount(app)`` and keeps logic in the library."""
