"""Write the record of a release's stateful resources (tests/infra/stateful-resources.json) from synthesized
templates, on purpose, when a release is cut (docs/operate/upgrade-and-cost.md, "Upgrading"). The test then holds
every later template against it.

    make synth && STAGE=prod make synth    # or the CDK CLI's synth with the README's context
    python scripts/record_stateful_resources.py cdk.out/jobsched-dev.template.json cdk.out/jobsched-prod.template.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from infra.upgrades import stateful_resources

RECORD = Path(__file__).resolve().parents[1] / "tests" / "infra" / "stateful-resources.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("templates", nargs="+", type=Path, help="cdk.out/jobsched-STAGE.template.json files")
    args = parser.parse_args()
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    for path in args.templates:
        stage = path.name.removeprefix("jobsched-").removesuffix(".template.json")
        record[stage] = stateful_resources(json.loads(path.read_text()))
        print(f"{stage}: {len(record[stage])} stateful resources")
    RECORD.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(RECORD)


if __name__ == "__main__":
    main()
