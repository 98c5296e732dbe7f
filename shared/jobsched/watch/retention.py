"""Retention of the hot tables without TTL (#51): a table with multi-Region strong consistency has no TTL, so
items past their ``expires_at`` (finished runs past their job's retention, request windows, markers...) are
deleted by this sweeper, which the heartbeat checker calls every minute.

Bounded: each call reads at most ``PAGES`` pages of ``PAGE_ITEMS`` items per table and deletes what they hold
that has expired (one conditional write an item: an item given a later expiry meanwhile stays). A pass over a
table reads every item once; where it has got to is kept, so the next call goes on from there. At the defaults a
table's pass reads 2,000 items a minute (2.9 million a day); each item is read once a pass however long it is
kept, and deleted once. Nothing reads an item's expiry as its absence: readers never relied on TTL's timing
(DynamoDB's TTL deletes within days, not at the second), so an item swept late is only stored longer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from jobsched.ports import ExpiredItemsPort

PAGES = 2  # pages a table per call
PAGE_ITEMS = 1000  # items a page reads (Scan's Limit; 1 MB also ends a page)


@dataclass
class SweepReport:
    scanned: int = 0
    deleted: int = 0
    passes_ended: list[str] = field(default_factory=list)


@dataclass
class Sweeper:
    store: ExpiredItemsPort
    pages: int = PAGES
    page_items: int = PAGE_ITEMS

    def sweep(self, now: datetime) -> SweepReport:
        report = SweepReport()
        for table in self.store.tables():
            cursor = self.store.sweep_cursor(table)
            for _ in range(self.pages):
                page = self.store.expired_page(table, cursor=cursor, now=now, limit=self.page_items)
                report.scanned += page.scanned
                if page.keys:
                    report.deleted += self.store.delete_expired(table, page.keys, now=now)
                cursor = page.cursor
                if cursor is None:
                    report.passes_ended.append(table)
                    break
            self.store.save_sweep_cursor(table, cursor)
        return report
