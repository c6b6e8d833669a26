"""The OIDC token sources of the platforms, by their ``--id-token-source`` value: every source but
``auto``, which reads this table to choose among them (``registry`` adds it to the one table).
"""

from __future__ import annotations

from .aws import AwsSource
from .azure import AzureSource
from .azurepipelines import AzurePipelinesSource
from .base import Source
from .buildkite import BuildkiteSource
from .circleci import CircleCiSource
from .gcp import GcpSource
from .github import GitHubActionsSource
from .local import FileSource
from .spiffe import SpiffeSource
from .variables import BitbucketSource, EnvSource, GitLabSource

PLATFORMS: dict[str, type[Source]] = {
    source.name: source
    for source in (
        FileSource,
        EnvSource,
        GitHubActionsSource,
        GitLabSource,
        BuildkiteSource,
        CircleCiSource,
        BitbucketSource,
        AzurePipelinesSource,
        GcpSource,
        AzureSource,
        AwsSource,
        SpiffeSource,
    )
}
