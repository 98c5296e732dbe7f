"""The team API: identity and isolation, callback tokens, error mapping, and the routes (app.py)."""
