"""Lambda deploy units: one folder per function, each a thin ``app.py`` over the agentvm core."""
