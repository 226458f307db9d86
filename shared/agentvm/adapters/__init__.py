"""Adapters: one module per technology, each implementing a port of agentvm.ports."""
