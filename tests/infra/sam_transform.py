"""Transform template.yaml with SAM's own translator, offline: what CloudFormation
actually receives after `Transform: AWS::Serverless-2016-10-31`.

Runs under the aws-sam-cli virtual environment (.venv-sam), whose samtranslator pins a
pydantic that clashes with ours, so the tests call it as a subprocess:

    .venv-sam/bin/python tests/infra/sam_transform.py template.yaml '{"Stage": "prod"}'

prints the transformed template as JSON. No AWS call is made: the only network use of
the translator is the managed-policy lookup for policy *names* in `Policies`, which the
template never uses (the stub below fails loudly if that ever changes).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any


class _NoManagedPolicyLookups:
    def load(self) -> dict[str, str]:
        raise SystemExit(
            "the template names an AWS managed policy in Policies: the offline transform "
            "cannot resolve it (and least privilege forbids it)"
        )


def _as_packaged(template: dict[str, Any]) -> None:
    """Point local CodeUri/ContentUri at S3, as `sam deploy` does after uploading them."""
    for resource in (template.get("Resources") or {}).values():
        props = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str) and not props[key].startswith("s3://"):
                props[key] = f"s3://packaged-artifacts/{props[key].strip('/')}.zip"


def main(argv: list[str]) -> int:
    # The translator asks boto3 for the region (pseudo parameters, partition); no call
    # is made with it, and no credentials are needed.
    os.environ.setdefault("AWS_DEFAULT_REGION", "eu-central-1")
    # Feature-toggle notices would drown real errors on stderr.
    logging.basicConfig(level=logging.ERROR)
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

    template_path = Path(argv[1])
    overrides: dict[str, Any] = json.loads(argv[2]) if len(argv) > 2 else {}
    template = yaml_parse(template_path.read_text())
    _as_packaged(template)
    parameters = {
        name: spec.get("Default")
        for name, spec in (template.get("Parameters") or {}).items()
        if "Default" in spec
    }
    parameters.update(overrides)
    # The overrides also become the defaults, so tools that evaluate Conditions from the
    # defaults (checkov) see the resources this parameter set creates.
    for name, value in overrides.items():
        if name in (template.get("Parameters") or {}):
            template["Parameters"][name]["Default"] = value
    parameters.setdefault("AWS::Region", "eu-central-1")
    parameters.setdefault("AWS::AccountId", "123456789012")
    parameters.setdefault("AWS::Partition", "aws")
    parameters.setdefault("AWS::StackName", "workflow-runner")
    transformed = transform(template, parameters, _NoManagedPolicyLookups())  # type: ignore[arg-type]
    json.dump(transformed, sys.stdout, indent=1, sort_keys=True, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
