"""A token file the platform keeps fresh: Kubernetes, Azure workload identity, any agent on disk.

Read afresh at every exchange: kubelet rotates a projected token file at 80% of its life by swapping a
symlink, so a cached copy goes stale.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...lite.names import where
from .base import IdToken, Source, SourceInputs

FILE_SETTING = where("id_token_file")
AZURE_FEDERATED_TOKEN_FILE = "AZURE_FEDERATED_TOKEN_FILE"


@dataclass(slots=True)
class FileSource(Source):
    """A token file: Kubernetes' projected service-account token, Azure workload identity's
    ``AZURE_FEDERATED_TOKEN_FILE``, anything a platform agent keeps fresh on disk."""

    name = "file"
    platform = "a token file"
    options = ("id_token_file",)

    path: str
    wall: Callable[[], float] = time.time
    description: str = ""
    setting: str = FILE_SETTING  # what points at the file, for messages

    def __post_init__(self) -> None:
        self.description = f"file {self.path}"

    @classmethod
    def build(cls, inputs: SourceInputs) -> FileSource:
        return cls(inputs.id_token_file, inputs.wall, setting=inputs.spell("id_token_file"))

    @classmethod
    def detect(cls, inputs: SourceInputs) -> tuple[str, Source] | None:
        # Azure workload identity's webhook sets this in the pod; the file is a projected token.
        federated = inputs.environ.get(AZURE_FEDERATED_TOKEN_FILE)
        if federated:
            return f"{AZURE_FEDERATED_TOKEN_FILE} is set (Azure workload identity)", cls(
                federated, inputs.wall, setting=AZURE_FEDERATED_TOKEN_FILE
            )
        if Path(inputs.id_token_file).is_file():
            return f"a token file is at {inputs.id_token_file} ({FILE_SETTING})", cls.build(inputs)
        return None

    async def read(self) -> IdToken:
        from ...lite.oidccheck import read_id_token_file  # (datetime): run's settings read this module

        # A small local file: reading it inline costs less than a thread hop.
        return IdToken(*read_id_token_file(self.path, self.wall))

    def fix(self) -> str:
        return (
            f"mount the platform's token at {self.path} (in Kubernetes a projected "
            "serviceAccountToken volume, mounted as a directory, readable by the pod's runAsUser or "
            f"fsGroup) or point {self.setting} at the token file itself"
        )

    def renewal(self) -> str:
        return (
            "kubelet renews a projected token at 80% of its life: check that the pod and its node are "
            "healthy and that the volume is mounted as a directory (a subPath mount is never updated)"
        )
