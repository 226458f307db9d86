"""The turn: the agent loop, its context and history, compaction and provider retries."""
