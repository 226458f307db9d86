"""What Lambda does with a function's output, on moto: each line into the functions' log group.

On AWS, everything a function writes to stdout (Powertools' JSON log lines, EMF metric lines) is
shipped by the Lambda runtime to its log group, where Logs Insights finds it. Tests of the AWS
host's ``/v1/logs`` and ``/v1/metrics`` play that part with ``MotoLogShipper``: a logging handler
(for log lines) and ``ship`` (for EMF lines) that put each line into moto's log group.
"""

from __future__ import annotations

import itertools
import logging
import time

import boto3

GROUP = "/aws/lambda/agentvm-test"
_streams = itertools.count(1)


class MotoLogShipper(logging.Handler):
    def __init__(self, group: str = GROUP, *, region: str = "us-east-1") -> None:
        super().__init__()
        self.group = group
        self.logs = boto3.client("logs", region_name=region)
        if not self.logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]:
            self.logs.create_log_group(logGroupName=group)
        self.stream = f"2026/01/15/[$LATEST]{next(_streams):032x}"
        self.logs.create_log_stream(logGroupName=group, logStreamName=self.stream)

    def emit(self, record: logging.LogRecord) -> None:
        self.ship(self.format(record), int(record.created * 1000))

    def ship(self, line: str, ts_ms: int | None = None) -> None:
        event = {"timestamp": ts_ms if ts_ms is not None else time.time_ns() // 1_000_000, "message": line}
        self.logs.put_log_events(logGroupName=self.group, logStreamName=self.stream, logEvents=[event])


__all__ = ["GROUP", "MotoLogShipper"]
