"""The AWS adapters: DynamoDB (PynamoDB, one table), SQS FIFO, API Gateway push."""
