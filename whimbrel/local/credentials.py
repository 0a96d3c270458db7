"""Dummy AWS credentials for a local DynamoDB endpoint, and only for one.

DynamoDB Local checks that a request is signed, not by whom, so a newcomer who never
configured AWS should not need to invent credentials to try Whimbrel on their machine.
:func:`supply_local_credentials` fills them in for *this process* when the endpoint is
on the loopback interface and boto3 would find none. It never does so for any other
endpoint: against real AWS a missing credential must stay a clear error.
"""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit

import botocore.session
from botocore.exceptions import BotoCoreError

__all__ = ["DUMMY_CREDENTIAL", "credentials_found", "is_local_endpoint",
           "supply_local_credentials"]

#: DynamoDB Local (since 2.0) rejects access key ids that are not plain letters and digits.
DUMMY_CREDENTIAL = "whimbrel"

#: Providers that ask the network (ECS task role, EC2 instance metadata). Skipped when
#: looking for credentials: on a laptop the metadata call alone waits a second or two,
#: and a local endpoint accepts the dummies as well as any role's keys.
_NETWORK_PROVIDERS = ("container-role", "iam-role")


def is_local_endpoint(url: str | None) -> bool:
    """True when ``url`` names this machine: ``localhost`` or a loopback address
    (``127.0.0.1``, any of ``127.0.0.0/8``, ``::1``)."""
    if not url:
        return False
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def credentials_found() -> bool:
    """Whether boto3's chain (environment, shared files, profiles, SSO, processes)
    yields credentials, without asking the instance or container metadata services.

    A broken configuration (a missing ``AWS_PROFILE``, half a key pair) counts as found:
    it is the user's setting, and the error it leads to names it.
    """
    try:
        resolver = botocore.session.get_session().get_component("credential_provider")
        for name in _NETWORK_PROVIDERS:
            resolver.remove(name)
        return resolver.load_credentials() is not None
    except BotoCoreError:
        return True


def supply_local_credentials(endpoint_url: str | None) -> bool:
    """Set dummy ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` in this process's
    environment when ``endpoint_url`` is local and no credentials are configured.

    Returns:
        True when the dummies were set; False when the endpoint is not local (real AWS,
        or anything else) or credentials exist (they are left alone).
    """
    if not is_local_endpoint(endpoint_url) or credentials_found():
        return False
    os.environ["AWS_ACCESS_KEY_ID"] = DUMMY_CREDENTIAL
    os.environ["AWS_SECRET_ACCESS_KEY"] = DUMMY_CREDENTIAL
    return True
