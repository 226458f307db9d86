"""Composition roots: ``hosts.local`` wires ``avm serve``, ``hosts.aws`` the Lambdas (with
``hosts.lambda_entry``, the SQS workers' batch handling).

Only these modules know which adapters a host uses; neither imports the other."""
