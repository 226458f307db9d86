"""AgentVM's single DynamoDB table on moto, with the fixed schema ``template.yaml`` declares."""

from __future__ import annotations

import boto3

TABLE = "agentvm-test"
REGION = "us-east-1"


def create_table(name: str = TABLE) -> None:
    """Call inside ``moto.mock_aws()``."""
    client = boto3.client("dynamodb", region_name=REGION)
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk", "gsi1pk", "gsi1sk")
        ],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "gsi1",
                "KeySchema": [
                    {"AttributeName": "gsi1pk", "KeyType": "HASH"},
                    {"AttributeName": "gsi1sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )
    client.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"AttributeName": "expiresAt", "Enabled": True}
    )
