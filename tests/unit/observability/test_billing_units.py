"""The cost meter's DynamoDB billing rules for the writes the usage sums make (benchmarks/billing.py):
an update is billed on the item it leaves (its ``SET`` and ``ADD`` values included), and every item
of a transaction twice."""

from __future__ import annotations

from benchmarks.billing import DDB_WRITE, AwsMeter, TableSchema

SCHEMA = TableSchema(("pk", "sk"), {"gsi1": ("gsi1pk", "gsi1sk")})
KEY = {"pk": {"S": "USAGEAGG#acme"}, "sk": {"S": "D#2026-01-01#user-alice"}}


def update(names: dict[str, str], values: dict[str, dict[str, str]], expression: str) -> dict:
    return {
        "TableName": "t",
        "Key": KEY,
        "UpdateExpression": expression,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def bill(op: str, params: dict, old: list) -> tuple[str, float]:
    return AwsMeter(SCHEMA)._dynamodb(op, params, {}, old, "us-east-1")


def test_an_update_is_billed_on_what_its_set_and_add_clauses_leave():
    big = {"S": "x" * 1500}  # a label over 1 KB: the item left is over 1 KB
    params = update(
        {"#0": "c1_k", "#1": "c1_n", "#2": "c1_i"},
        {":0": big, ":1": {"N": "1"}, ":2": {"N": "500"}},
        "SET #0 = if_not_exists (#0, :0) ADD #1 :1, #2 :2",
    )

    assert bill("UpdateItem", params, [None]) == (DDB_WRITE, 2.0)
    small = update({"#1": "c1_n"}, {":1": {"N": "1"}}, "ADD #1 :1")
    assert bill("UpdateItem", small, [None]) == (DDB_WRITE, 1.0)


def test_each_item_of_a_transaction_is_billed_twice():
    record = {"pk": {"S": "TURN#t1"}, "sk": {"S": "USAGE"}, "data": {"S": "x" * 300}}
    add = update({"#1": "c1_n"}, {":1": {"N": "1"}}, "ADD #1 :1")
    del add["TableName"]
    params = {
        "TransactItems": [{"Put": {"TableName": "t", "Item": record}}, {"Update": {**add, "TableName": "t"}}]
    }

    assert bill("TransactWriteItems", params, [None, None]) == (DDB_WRITE, 4.0)
