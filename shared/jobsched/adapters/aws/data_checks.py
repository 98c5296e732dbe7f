"""Whether an object a run waits for is there: HeadObject as the team, on a bucket checked to be the team's.

The bucket's tags are read (cached) before every check, as a target's are before every call: a bucket
re-tagged to another team since the job was stored is refused (``NotOwned``), never read.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from jobsched.adapters.aws.ownership import TeamSessions
from jobsched.tenancy.ownership import OwnershipGuard, ResourceKind, ResourceRef

ABSENT = {"404", "NoSuchKey", "NotFound"}


class S3DataChecks:
    def __init__(self, sessions: TeamSessions, guard: OwnershipGuard) -> None:
        self.sessions, self.guard = sessions, guard

    def object_exists(self, team: str, bucket: str, key: str) -> bool:
        self.guard.check(ResourceRef(ResourceKind.BUCKET, bucket, "wait_for.s3"), team)
        try:
            self.sessions.client(team, "s3").head_object(Bucket=bucket, Key=key)
        except ClientError as error:
            if str(error.response.get("Error", {}).get("Code", "")) in ABSENT:
                return False
            raise
        return True
