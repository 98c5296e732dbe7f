"""Permissions proven offline: what the code asks of AWS, recorded, and judged against the template (a test tool,
never deployed)."""
