"""Signing registry token requests with the user's Ollama key (``~/.ollama/id_ed25519``), as Ollama does.

Ollama signs ``GET,<token url>,<base64 of the hex sha256 of an empty body>`` with its ed25519
key and sends ``<public key>:<signature>`` (both base64) as the token request's Authorization;
ollama.com uses it to give the key's owner access to their namespaces (pushes, private pulls).
Without a key, or with one we cannot read, token requests go out anonymously (public pulls).

Ed25519 (RFC 8032) is written out here, as the standard library has none; signing is a few
milliseconds, once per token. Only unencrypted OpenSSH keys are read (what Ollama writes).
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("cllm.store")

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)
Point = tuple[int, int, int, int]  # extended coordinates (X, Y, Z, T)


def _recover_x(y: int, sign: int) -> int | None:
    if y >= _P:
        return None
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P:
        return None
    return _P - x if (x & 1) != sign else x


_GY = 4 * pow(5, _P - 2, _P) % _P
_GX = _recover_x(_GY, 0)
assert _GX is not None
_G: Point = (_GX, _GY, 1, _GX * _GY % _P)
_IDENTITY: Point = (0, 1, 1, 0)


def _add(p: Point, q: Point) -> Point:
    a = (p[1] - p[0]) * (q[1] - q[0]) % _P
    b = (p[1] + p[0]) * (q[1] + q[0]) % _P
    c = 2 * p[3] * q[3] * _D % _P
    d = 2 * p[2] * q[2] % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _mul(s: int, p: Point) -> Point:
    q = _IDENTITY
    while s:
        if s & 1:
            q = _add(q, p)
        p = _add(p, p)
        s >>= 1
    return q


def _encode(p: Point) -> bytes:
    zinv = pow(p[2], _P - 2, _P)
    x, y = p[0] * zinv % _P, p[1] * zinv % _P
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


def _decode(data: bytes) -> Point | None:
    if len(data) != 32:
        return None
    y = int.from_bytes(data, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = _recover_x(y, sign)
    return None if x is None else (x, y, 1, x * y % _P)


def _equal(p: Point, q: Point) -> bool:
    return (p[0] * q[2] - q[0] * p[2]) % _P == 0 and (p[1] * q[2] - q[1] * p[2]) % _P == 0


def _secret_scalar(seed: bytes) -> tuple[int, bytes]:
    h = hashlib.sha512(seed).digest()
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return a, h[32:]


def public_key(seed: bytes) -> bytes:
    return _encode(_mul(_secret_scalar(seed)[0], _G))


def sign(seed: bytes, message: bytes) -> bytes:
    """The 64-byte Ed25519 signature of ``message`` with the 32-byte secret ``seed``."""
    a, prefix = _secret_scalar(seed)
    public = _encode(_mul(a, _G))
    r = int.from_bytes(hashlib.sha512(prefix + message).digest(), "little") % _L
    big_r = _encode(_mul(r, _G))
    k = int.from_bytes(hashlib.sha512(big_r + public + message).digest(), "little") % _L
    return big_r + ((r + k * a) % _L).to_bytes(32, "little")


def verify(public: bytes, message: bytes, signature: bytes) -> bool:
    a = _decode(public)
    if a is None or len(signature) != 64:
        return False
    r = _decode(signature[:32])
    s = int.from_bytes(signature[32:], "little")
    if r is None or s >= _L:
        return False
    k = int.from_bytes(hashlib.sha512(signature[:32] + public + message).digest(), "little") % _L
    return _equal(_mul(s, _G), _add(r, _mul(k, a)))


# -- OpenSSH keys ------------------------------------------------------------------------------


class KeyFileError(ValueError):
    """A key file that is not an unencrypted OpenSSH ed25519 key."""


def _ssh_string(data: bytes, pos: int) -> tuple[bytes, int]:
    if pos + 4 > len(data):
        raise KeyFileError("truncated key")
    n = int.from_bytes(data[pos : pos + 4], "big")
    if pos + 4 + n > len(data):
        raise KeyFileError("truncated key")
    return data[pos + 4 : pos + 4 + n], pos + 4 + n


def _wire(*parts: bytes) -> bytes:
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)


@dataclass(frozen=True)
class SshKey:
    seed: bytes  # the 32-byte ed25519 secret
    public: bytes  # the 32-byte public key

    @property
    def authorized_key(self) -> str:
        """The public key as the second field of an authorized_keys line (what Ollama sends)."""
        return base64.b64encode(_wire(b"ssh-ed25519", self.public)).decode()

    def sign_request(self, method: str, url: str, body: bytes = b"") -> str:
        """Ollama's Authorization value for a token request: ``<public key>:<signature>``."""
        digest = hashlib.sha256(body).hexdigest().encode()
        data = f"{method},{url},{base64.b64encode(digest).decode()}".encode()
        return f"{self.authorized_key}:{base64.b64encode(sign(self.seed, data)).decode()}"


_PEM = "OPENSSH PRIVATE KEY"


def parse_openssh_key(text: str) -> SshKey:
    lines = [line.strip() for line in text.strip().splitlines()]
    if not lines or (lines[0], lines[-1]) != (f"-----BEGIN {_PEM}-----", f"-----END {_PEM}-----"):
        raise KeyFileError("not an OpenSSH private key")
    try:
        data = base64.b64decode("".join(lines[1:-1]), validate=True)
    except ValueError as exc:
        raise KeyFileError("not an OpenSSH private key") from exc
    magic = b"openssh-key-v1\0"
    if not data.startswith(magic):
        raise KeyFileError("not an OpenSSH private key")
    pos = len(magic)
    cipher, pos = _ssh_string(data, pos)
    kdf, pos = _ssh_string(data, pos)
    _options, pos = _ssh_string(data, pos)
    if cipher != b"none" or kdf != b"none":
        raise KeyFileError("the key is encrypted")
    count = int.from_bytes(data[pos : pos + 4], "big")
    pos += 4
    if count != 1:
        raise KeyFileError("expected one key")
    _public_blob, pos = _ssh_string(data, pos)
    private, pos = _ssh_string(data, pos)
    if private[:4] != private[4:8]:
        raise KeyFileError("the key is encrypted or damaged")
    ppos = 8
    kind, ppos = _ssh_string(private, ppos)
    if kind != b"ssh-ed25519":
        raise KeyFileError(f"not an ed25519 key ({kind.decode(errors='replace')})")
    public, ppos = _ssh_string(private, ppos)
    secret, ppos = _ssh_string(private, ppos)
    if len(public) != 32 or len(secret) != 64 or secret[32:] != public:
        raise KeyFileError("damaged ed25519 key")
    if public_key(secret[:32]) != public:
        raise KeyFileError("the key's public half does not match its secret")
    return SshKey(secret[:32], public)


def ollama_signer(path: Path | None = None) -> Callable[[str, str], str | None]:
    """Signs token requests with ``~/.ollama/id_ed25519`` when there is a readable key, else nothing."""
    key_path = path or Path.home() / ".ollama" / "id_ed25519"

    def signer(method: str, url: str) -> str | None:
        try:
            key = parse_openssh_key(key_path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, KeyFileError) as exc:
            log.warning("not signing the registry token request with %s: %s", key_path, exc)
            return None
        return key.sign_request(method, url)

    return signer
