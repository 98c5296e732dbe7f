"""Company calendars and maintenance windows on the Jobs table: pk COMPANY, sk "ENTRY#{kind}#company/{name}", the
document as one JSON attribute. Read whole with one query (bounded: ``core.spec.company.MAX_CALENDARS`` and
``MAX_WINDOWS``)."""

from __future__ import annotations

import json
from typing import Any

from jobsched.adapters.aws.dynamo import every_item, to_values
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.core.names import JobsKeys


class CompanyStore(JobsTable):
    def company_entries(self) -> dict[str, dict[str, Any]]:
        items = every_item(
            self.db,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues=to_values({":pk": JobsKeys.COMPANY, ":prefix": JobsKeys.COMPANY_ENTRY_PREFIX}),
            max_items=1000,
        )
        return {
            str(item[JobsKeys.SK]).removeprefix(JobsKeys.COMPANY_ENTRY_PREFIX): json.loads(str(item["document"]))
            for item in items
        }

    def put_company_entry(self, kind: str, reference: str, document: dict[str, Any] | None) -> None:
        key = self._key(JobsKeys.COMPANY, f"{JobsKeys.COMPANY_ENTRY_PREFIX}{kind}#{reference}")
        if document is None:
            self.db.delete_item(TableName=self.table, Key=key)
            return
        self.db.put_item(TableName=self.table, Item=key | to_values({"document": json.dumps(document)}))
