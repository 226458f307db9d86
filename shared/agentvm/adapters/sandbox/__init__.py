"""The sandbox's parts: the process sandbox and workspace file access both hosts share, the limits
of a job, and the AWS worker's run on a workspace synced from and to S3 (``synced``)."""
