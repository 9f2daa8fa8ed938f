"""S3, Glue, IAM and STS over HTTP: a ``moto_server`` child process that checks every request's credentials.

moto accepts any key by default; here it does not. Once ``start()`` has
created an IAM user (the lake writer, allowed everything) and a role (what a
REST catalog vends short-lived credentials for), it switches on moto's request
authentication (``POST /moto-api/reset-auth 0``): from then on a request signed
with an unknown key id, a wrong secret or a wrong session token is refused as
AWS refuses it (``InvalidAccessKeyId``, ``SignatureDoesNotMatch``,
``InvalidToken``), and an unsigned one too. A FileIO that fell back to the
environment, or lost the connection's keys, fails loudly against it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account
WRITER_USER = "snowberg-lake-writer"
VENDED_ROLE = "snowberg-vended"
_ALLOW_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class MotoServer:
    """One ``moto_server`` process; ``key_id``/``secret`` are the lake writer's keys (valid once started)."""

    log_dir: Path
    port: int = 0
    key_id: str = ""
    secret: str = ""
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoServer:
        import requests

        self.port = self.port or free_port()
        exe = Path(sys.executable).with_name("moto_server")
        log = (self.log_dir / "moto_server.log").open("ab")
        self._proc = subprocess.Popen(
            [str(exe), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(f"{self.endpoint}/moto-api/", timeout=2)
                break
            except requests.ConnectionError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start (see {self.log_dir / 'moto_server.log'})") from None
                time.sleep(0.1)
        # Set-up runs before authentication is on (any key is accepted until then).
        iam = self._client("iam", "setup", "setup")
        iam.create_user(UserName=WRITER_USER)
        iam.put_user_policy(UserName=WRITER_USER, PolicyName="lake", PolicyDocument=json.dumps(_ALLOW_ALL))
        key = iam.create_access_key(UserName=WRITER_USER)["AccessKey"]
        self.key_id, self.secret = key["AccessKeyId"], key["SecretAccessKey"]
        trust = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
        }
        iam.create_role(RoleName=VENDED_ROLE, AssumeRolePolicyDocument=json.dumps(trust))
        iam.put_role_policy(RoleName=VENDED_ROLE, PolicyName="lake", PolicyDocument=json.dumps(_ALLOW_ALL))
        requests.post(f"{self.endpoint}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
        return self

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        self._proc = None

    def _client(self, service: str, key_id: str, secret: str) -> Any:
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
        )

    def client(self, service: str) -> Any:
        """A boto3 client with the lake writer's keys (for set-up and assertions in the test process)."""
        return self._client(service, self.key_id, self.secret)

    def create_bucket(self, name: str) -> str:
        self.client("s3").create_bucket(Bucket=name)
        return name

    def delete_bucket(self, name: str) -> None:
        """Empty and delete a bucket (what an operator's mistake or a lifecycle rule does)."""
        s3 = self.client("s3")
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            for obj in page.get("Contents", []):
                s3.delete_object(Bucket=name, Key=obj["Key"])
        s3.delete_bucket(Bucket=name)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        s3 = self.client("s3")
        out: list[str] = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return out

    def vend(self, session: str = "snowberg-task") -> dict[str, str]:
        """Short-lived credentials for the vended role (what a REST catalog hands a client), as FileIO properties."""
        creds = self.client("sts").assume_role(
            RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{VENDED_ROLE}", RoleSessionName=session
        )["Credentials"]
        return {
            "s3.access-key-id": creds["AccessKeyId"],
            "s3.secret-access-key": creds["SecretAccessKey"],
            "s3.session-token": creds["SessionToken"],
            "s3.endpoint": self.endpoint,
            "s3.region": REGION,
        }

    def writer_properties(self) -> dict[str, str]:
        """The lake writer's keys as pyiceberg S3 FileIO properties."""
        return {
            "s3.endpoint": self.endpoint,
            "s3.access-key-id": self.key_id,
            "s3.secret-access-key": self.secret,
            "s3.region": REGION,
        }
