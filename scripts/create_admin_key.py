"""Create an API key on a deployed AgentVM stack and print its token, once (a deploy step).

A new stack has no keys, and its HTTP API manages keys only for a caller holding an admin key:
this creates the first one. Run it once after ``sam deploy``, with AWS credentials for the
stack's account (it needs ``dynamodb:PutItem`` on the table, and ``ssm:GetParameter`` and
``kms:Decrypt`` on the secret's parameter):

    .venv/bin/python scripts/create_admin_key.py --table <TableName output> --tenant acme \\
        [--secret-parameter /agentvm/auth-secret] [--region eu-west-1] [--scope admin --scope client]

The token goes to stdout, once (keep it: it is stored only as an HMAC); what was created goes to
stderr. It is ``avm keys create --table ...``: the functions' own wiring
(``agentvm.hosts.aws.aws_security``), so the key verifies in every function. The same CLI lists
and revokes keys and sets budgets on the stack (``avm keys list|revoke``, ``avm budgets set|show``
with ``--table``); with the admin key, so does the HTTP API (``/v1/auth/keys``, ``/v1/budgets``).
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from agentvm.cli.main import AWS_SECRET_PARAMETER
    from agentvm.cli.main import main as avm

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--table", required=True, help="the stack's DynamoDB table (its TableName output)")
    parser.add_argument("--tenant", required=True, help="the tenant the key belongs to, e.g. acme")
    parser.add_argument(
        "--secret-parameter",
        default=AWS_SECRET_PARAMETER,
        help=f"the SSM SecureString of the server secret (the AuthSecretParameter output; default "
        f"{AWS_SECRET_PARAMETER})",
    )
    parser.add_argument("--region", help="the stack's AWS region (default: the AWS config's)")
    parser.add_argument(
        "--scope", action="append", choices=["admin", "client"], help="repeatable (default: admin)"
    )
    parser.add_argument("--name", default="admin key (create_admin_key.py)")
    args = parser.parse_args(argv)

    command = ["keys", "create", "--table", args.table, "--secret-parameter", args.secret_parameter]
    command += ["--tenant", args.tenant, "--name", args.name]
    for scope in args.scope or ["admin"]:
        command += ["--scope", scope]
    if args.region:
        command += ["--region", args.region]
    return avm(command)


if __name__ == "__main__":
    sys.exit(main())
