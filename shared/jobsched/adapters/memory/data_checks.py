"""Objects in memory, each bucket owned by a team: what ``S3DataChecks`` answers, for the pipeline's tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from jobsched.core.item_lists import too_large
from jobsched.tenancy.ownership import NotOwned, ResourceKind, ResourceRef


@dataclass
class MemoryDataChecks:
    owners: dict[str, str] = field(default_factory=dict)  # bucket -> team
    objects: dict[tuple[str, str], bytes] = field(default_factory=dict)
    checks: int = 0

    def put(self, bucket: str, key: str, body: bytes = b"") -> None:
        self.objects[(bucket, key)] = body

    def object_exists(self, team: str, bucket: str, key: str) -> bool:
        self.checks += 1
        self._owned(team, bucket, "wait_for.s3")
        return (bucket, key) in self.objects

    def read_object(self, team: str, bucket: str, key: str, *, max_bytes: int) -> bytes | None:
        self._owned(team, bucket, "map.over")
        body = self.objects.get((bucket, key))
        if body is not None and len(body) > max_bytes:
            raise too_large(len(body), max_bytes)
        return body

    def _owned(self, team: str, bucket: str, place: str) -> None:
        if self.owners.get(bucket) != team:
            resource = ResourceRef(ResourceKind.BUCKET, bucket, place)
            raise NotOwned(resource, team, f"bucket {bucket} is not tagged jobsched-team={team}")
