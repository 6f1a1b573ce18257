"""Who may speak to a listening viewer: the shared secret its workers present, and where it listens.

A viewer that listens beyond loopback without a secret would let anyone on the network claim it;
``collviz view --listen`` and the torchrun side (``collviz worker``, ``collviz run --viewer``) read
the same secret here, from ``--secret-file`` or ``$COLLVIZ_SECRET``.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from pathlib import Path

from ..errors import UsageError
from ..wire.files import read_regular_file

__all__ = ["SECRET_ENV", "load_secret", "generated_secret", "check_listen_address", "parse_listen"]

SECRET_ENV = "COLLVIZ_SECRET"
"""Environment variable holding the shared secret (or use --secret-file)."""

MIN_SECRET_LENGTH = 16

MAX_SECRET_BYTES = 4096
"""A secret file larger than this is refused unread (it cannot be a secret; /dev/zero is not one)."""


def load_secret(secret_file: Path | None) -> bytes | None:
    """The shared secret from ``secret_file`` or $COLLVIZ_SECRET (None if neither is given)."""
    if secret_file is not None:
        try:
            text = read_regular_file(secret_file, MAX_SECRET_BYTES, "--secret-file").decode("utf-8", "replace").strip()
        except OSError as exc:
            raise UsageError(f"--secret-file {secret_file}: {exc.strerror}") from None
    else:
        text = os.environ.get(SECRET_ENV, "").strip()
        if not text:
            return None
    if len(text) < MIN_SECRET_LENGTH:
        raise UsageError(f"the shared secret must be at least {MIN_SECRET_LENGTH} characters (e.g. from: openssl rand -hex 16)")
    return text.encode()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` → (host, port), with a one-line error for anything else."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65535:
        raise UsageError(f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:5555 (PORT+1 is used too)")
    return host.strip("[]"), int(port)


def generated_secret() -> bytes:
    """A fresh random secret (32 hex digits) for a loopback viewer started without one."""
    return secrets.token_hex(16).encode()


def check_listen_address(host: str, secret: bytes | None) -> None:
    """Refuse to expose the event socket beyond loopback without a shared secret."""
    if secret is None and not _is_loopback(host):
        raise UsageError(
            f"listening on {host} exposes the event socket to the network: give a shared secret "
            f"(${SECRET_ENV} or --secret-file) that the workers present too, or listen on 127.0.0.1"
        )
