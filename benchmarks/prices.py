"""The one price table of the cost meter: us-east-1 on-demand list prices, with sources.

Source of every figure: ``COST_MODEL.md`` (shared design docs, "Unit prices"), which cites the
AWS pricing pages; details and caveats in ``reference/aws-facts.md`` §0 and §8. Check the live
pricing pages before quoting a budget: several figures there come from AWS's worked examples.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    usd: float
    per: str
    source: str


LAMBDA_ARM_GB_S = Price(0.0000133334, "GB-second (arm64)", "aws.amazon.com/lambda/pricing")
LAMBDA_REQUEST = Price(0.20 / 1e6, "request", "aws.amazon.com/lambda/pricing")
WS_MESSAGE = Price(
    1.00 / 1e6, "WebSocket message, each direction, per 32 KB unit", "aws.amazon.com/api-gateway/pricing"
)
WS_CONNECTION_MINUTE = Price(0.25 / 1e6, "connection-minute", "aws.amazon.com/api-gateway/pricing")
HTTP_REQUEST = Price(1.00 / 1e6, "HTTP API request, per 512 KB unit", "aws.amazon.com/api-gateway/pricing")
SQS_FIFO_REQUEST = Price(0.50 / 1e6, "FIFO request, per 64 KB unit", "aws.amazon.com/sqs/pricing")
DDB_WRITE_UNIT = Price(0.625 / 1e6, "write request unit (1 KB)", "aws.amazon.com/dynamodb/pricing/on-demand")
DDB_READ_UNIT = Price(
    0.125 / 1e6,
    "read request unit (4 KB; eventually consistent = half)",
    "aws.amazon.com/dynamodb/pricing/on-demand",
)
S3_WRITE_REQUEST = Price(0.005 / 1000, "S3 PUT, COPY, POST or LIST request", "aws.amazon.com/s3/pricing")
S3_READ_REQUEST = Price(0.0004 / 1000, "S3 GET or HEAD request", "aws.amazon.com/s3/pricing")
LOGS_INGEST_GB = Price(0.50, "GB of CloudWatch Logs ingested", "aws.amazon.com/cloudwatch/pricing")

# Token prices, for comparison only (COST_MODEL.md): Claude Haiku 4.5, per token.
HAIKU_INPUT_TOKEN = Price(1.0 / 1e6, "input token", "anthropic.com/pricing")
HAIKU_OUTPUT_TOKEN = Price(5.0 / 1e6, "output token", "anthropic.com/pricing")

ALL = {name: value for name, value in globals().items() if isinstance(value, Price)}
