"""Composition roots: ``hosts.local`` wires ``avm serve``, ``hosts.aws`` the Lambdas.

Only these modules know which adapters a host uses; neither imports the other."""
