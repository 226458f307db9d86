"""Config-centre secrets are sealed before they reach the store: the database holds ciphertext only.

The decision: a provider API key set through ``/v1/config`` (the keys ``configcentre.keys`` marks
``secret``) is encrypted with **AES-256-GCM** (``cryptography``'s ``AESGCM``) under a data key
**derived with HKDF-SHA256** from the server secret, the same secret API key hashes are made with
(locally ``<data_dir>/auth_secret`` or ``AVM_AUTH_SECRET``; on AWS the SSM SecureString
``AVM_AUTH_SECRET_PARAMETER`` names). The data key is never stored; the secret it comes from is
not in the database (locally a separate 0600 file, hosts/data_dir.py), so a copy of ``agentvm.db``
or a DynamoDB export alone reveals no secret. Why not a key of its own: one more file or
parameter to create, back up and rotate, for no gain over a purpose-bound derivation (the HKDF
``info`` keeps this key apart from the HMAC use of the same secret).

A stored value is ``avm-sealed:v1:<base64url(nonce || ciphertext || tag)>``, a fresh 96-bit
random nonce each time, and the setting's name as associated data: a sealed value moved to another
setting does not open.

**Rotation.** While ``auth_secret_previous`` is set, a value sealed under it still opens (the
current secret is tried first); the next write of the settings seals every secret again under the
current one. A value neither secret opens (the secret rotated twice in between) is treated as
unset, with a WARNING naming the setting: set it again.

**Older installs.** A value stored in plaintext by a version before this one still reads
(``open`` returns any value without the prefix as it is), and ``ConfigCentre.seal_stored_secrets``
seals it at the first start of this version (``avm serve`` calls it); every write seals anyway.

``cryptography`` is imported on first use only, so a Lambda handler that never touches a secret
never loads it.
"""

from __future__ import annotations

import base64
import logging
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

log = logging.getLogger("agentvm.config")

PREFIX = "avm-sealed:v1:"
_HKDF_INFO = b"agentvm config-centre secrets v1"
_NONCE_BYTES = 12


class SecretUnreadable(Exception):
    """A sealed value that no current server secret opens."""


def is_sealed(stored: str) -> bool:
    return stored.startswith(PREFIX)


class SecretSealer:
    """Seals and opens config-centre secrets. ``server_secrets`` returns the server secrets, newest
    first (the current one, then the previous while rotating); it is called once, on first use
    (on AWS that is an SSM read, which a handler that never touches a secret never makes)."""

    def __init__(self, server_secrets: Callable[[], Sequence[bytes]]) -> None:
        self._server_secrets = server_secrets
        self._keys: list[bytes] | None = None

    def __repr__(self) -> str:
        return f"SecretSealer({'loaded' if self._keys is not None else 'not loaded'})"

    def _data_keys(self) -> list[bytes]:
        if self._keys is None:
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF

            self._keys = [
                HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(secret)
                for secret in self._server_secrets()
            ]
            if not self._keys:
                raise RuntimeError("no server secret to seal config-centre secrets with")
        return self._keys

    def seal(self, name: str, value: str) -> str:
        """``value`` of the setting ``name``, encrypted under the current server secret."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = os.urandom(_NONCE_BYTES)
        sealed = AESGCM(self._data_keys()[0]).encrypt(nonce, value.encode(), name.encode())
        return PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode()

    def open(self, name: str, stored: str) -> str:
        """The value ``seal`` sealed (under the current or the previous server secret); a value
        without the prefix (an older version's plaintext) as it is. ``SecretUnreadable`` otherwise."""
        if not is_sealed(stored):
            return stored
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        try:
            raw = base64.urlsafe_b64decode(stored[len(PREFIX) :])
        except ValueError:
            raise SecretUnreadable(name) from None
        if len(raw) < _NONCE_BYTES + 16:  # a nonce and a GCM tag at least
            raise SecretUnreadable(name)
        nonce, sealed = raw[:_NONCE_BYTES], raw[_NONCE_BYTES:]
        for key in self._data_keys():
            try:
                return AESGCM(key).decrypt(nonce, sealed, name.encode()).decode()
            except InvalidTag:
                continue
        raise SecretUnreadable(name)


__all__ = ["PREFIX", "SecretSealer", "SecretUnreadable", "is_sealed"]
