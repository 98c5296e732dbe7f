"""Retention of the hot tables without TTL (#51): a table with multi-Region strong consistency has no TTL, so
items past their ``expires_at`` (finished runs past their job's retention, request windows, markers...) are
deleted by this sweeper, which the heartbeat checker calls every minute.

A pass reads a table once, a bounded ``PAGES`` pages of ``PAGE_ITEMS`` items a call (2,000 items a minute, 2.9
million a day), deleting what those pages hold that has expired, one write an item conditional on its expiry still
being past (an item given a later expiry meanwhile stays). Where the pass has got to is kept, so the next call
goes on from there; a new pass starts ``PASS_EVERY`` after the last one started. So an item is read about once
per ``PASS_EVERY`` it is kept (a run kept 30 days: 4 or 5 times, 0.125 read units each for an item under 1 KB)
and deleted once (1 write unit), at most ``PASS_EVERY`` after it expired plus the pass's length (an item's storage
for a few more days costs less than the reads a more frequent pass would). A table too big for a pass a week at this
pace (about 20 million items) is read ``CATCH_UP`` times faster while its pass is late (80 million items a week),
still a bounded page count a minute. Readers never relied on TTL's timing
(DynamoDB's TTL deletes within days, not at the second): an item swept late is only stored longer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobsched.ports import ExpiredItemsPort, SweepState

PAGES = 2  # pages a table per call
PAGE_ITEMS = 1000  # items a page reads (Scan's Limit; 1 MB also ends a page)
PASS_EVERY = timedelta(days=7)
CATCH_UP = 4  # a pass still going when the next should start reads this many times the pages a call


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
    pass_every: timedelta = PASS_EVERY

    def sweep(self, now: datetime) -> SweepReport:
        report = SweepReport()
        for table in self.store.tables():
            state = self.store.sweep_state(table)
            if state.cursor is None and state.next_pass_at is not None and now < state.next_pass_at:
                continue  # between passes
            # A pass that starts now: the next one may start a ``pass_every`` later.
            next_pass = state.next_pass_at if state.cursor is not None else now + self.pass_every
            late = state.cursor is not None and next_pass is not None and now >= next_pass
            cursor = state.cursor
            for _ in range(self.pages * (CATCH_UP if late else 1)):
                page = self.store.expired_page(table, cursor=cursor, now=now, limit=self.page_items)
                report.scanned += page.scanned
                if page.keys:
                    report.deleted += self.store.delete_expired(table, page.keys, now=now)
                cursor = page.cursor
                if cursor is None:
                    report.passes_ended.append(table)
                    break
            self.store.save_sweep_state(table, SweepState(cursor, next_pass))
        return report
