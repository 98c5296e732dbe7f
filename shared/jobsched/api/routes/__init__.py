"""One router per resource of the team API; ``api.app`` includes them all."""
