"""Objects in memory, each bucket owned by a team: what ``S3DataChecks`` answers, for the pipeline's tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from jobsched.tenancy.ownership import NotOwned, ResourceKind, ResourceRef


@dataclass
class MemoryDataChecks:
    owners: dict[str, str] = field(default_factory=dict)  # bucket -> team
    objects: set[tuple[str, str]] = field(default_factory=set)
    checks: int = 0

    def put(self, bucket: str, key: str) -> None:
        self.objects.add((bucket, key))

    def object_exists(self, team: str, bucket: str, key: str) -> bool:
        self.checks += 1
        if self.owners.get(bucket) != team:
            resource = ResourceRef(ResourceKind.BUCKET, bucket, "wait_for.s3")
            raise NotOwned(resource, team, f"bucket {bucket} is not tagged jobsched-team={team}")
        return (bucket, key) in self.objects
