"""How sandbox jobs run on both hosts: their processes and their limits."""
