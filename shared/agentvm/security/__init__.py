"""Who may do what: API keys, authentication, token budgets and rate limits."""
