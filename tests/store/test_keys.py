"""Ed25519 as RFC 8032 defines it, OpenSSH keys as ssh-keygen writes them, and Ollama's signed token requests."""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
from fakeregistry import openssh_key, ssh_wire

from cllm_ollama.store.keys import KeyFileError, ollama_signer, parse_openssh_key, public_key, sign, verify

# RFC 8032, section 7.1, TEST 1 and TEST 2.
VECTORS = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
]


@pytest.mark.parametrize(("secret", "public", "message", "signature"), VECTORS)
def test_rfc8032_vectors(secret: str, public: str, message: str, signature: str) -> None:
    seed, msg = bytes.fromhex(secret), bytes.fromhex(message)
    assert public_key(seed).hex() == public
    assert sign(seed, msg).hex() == signature
    assert verify(bytes.fromhex(public), msg, bytes.fromhex(signature))
    assert not verify(bytes.fromhex(public), msg + b"!", bytes.fromhex(signature))


def test_openssh_keys_are_read() -> None:
    seed = bytes.fromhex(VECTORS[0][0])
    key = parse_openssh_key(openssh_key(seed))
    assert key.seed == seed and key.public.hex() == VECTORS[0][1]
    assert base64.b64decode(key.authorized_key) == ssh_wire(b"ssh-ed25519", key.public)
    for broken in ("", "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----", openssh_key(seed)[:200]):
        with pytest.raises(KeyFileError):
            parse_openssh_key(broken)


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed")
def test_a_key_ssh_keygen_wrote(tmp_path: Path) -> None:
    path = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    key = parse_openssh_key(path.read_text())
    assert (tmp_path / "id_ed25519.pub").read_text().split()[1] == key.authorized_key


def test_a_token_request_is_signed_as_ollama_signs_it(tmp_path: Path) -> None:
    seed = bytes.fromhex(VECTORS[1][0])
    (tmp_path / "id_ed25519").write_text(openssh_key(seed))
    url = "https://registry.example/token?nonce=abc&scope=repository%3Ame%2Fm%3Apush&service=r&ts=1"
    header = ollama_signer(tmp_path / "id_ed25519")("GET", url)
    assert header is not None
    pub, sig = header.split(":")
    empty = base64.b64encode(hashlib.sha256(b"").hexdigest().encode()).decode()
    assert verify(base64.b64decode(pub)[-32:], f"GET,{url},{empty}".encode(), base64.b64decode(sig))
    assert ollama_signer(tmp_path / "absent")("GET", url) is None  # no key: anonymous
