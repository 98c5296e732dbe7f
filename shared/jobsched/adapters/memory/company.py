"""Company calendars and maintenance windows in memory: the same items as ``aws.jobs.company``."""

from __future__ import annotations

import json
from typing import Any

from jobsched.adapters.memory.table import MemoryTable
from jobsched.core.names import JobsKeys


class MemoryCompany:
    table: MemoryTable

    def company_entries(self) -> dict[str, dict[str, Any]]:
        return {
            str(item[JobsKeys.SK]).removeprefix(JobsKeys.COMPANY_ENTRY_PREFIX): json.loads(item["document"])
            for item in self.table.partition(
                JobsKeys.COMPANY, first=JobsKeys.COMPANY_ENTRY_PREFIX, last=JobsKeys.COMPANY_ENTRY_PREFIX + "\uffff"
            )
        }

    def put_company_entry(self, kind: str, reference: str, document: dict[str, Any] | None) -> None:
        sk = f"{JobsKeys.COMPANY_ENTRY_PREFIX}{kind}#{reference}"
        if document is None:
            self.table.delete(JobsKeys.COMPANY, sk)
            return
        self.table.put({JobsKeys.PK: JobsKeys.COMPANY, JobsKeys.SK: sk, "document": json.dumps(document)})
