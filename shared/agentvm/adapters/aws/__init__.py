"""The AWS adapters: DynamoDB (PynamoDB, one table), SQS FIFO, API Gateway push, the WebSocket
upgrade's authorizer and ``$connect`` events, S3 workspaces, CloudWatch."""
