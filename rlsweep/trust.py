"""The user's key, and files signed with it: what rlsweep loads from a directory others may
write to (a sweep directory on a shared, group-writable file system) runs no code of theirs.

A checkpoint is unpickled to be resumed, and unpickling runs whatever code the file names:
a ``checkpoint.pt`` planted in a job's directory would run as the sweep's owner. So every
checkpoint rlsweep writes is signed, and one is loaded only once its signature proves that
this user wrote it, for this job:

    header   magic (12 bytes), format version (2), SHA-256 of the job's identity (32),
             the payload's length (8)
    HMAC     HMAC-SHA256 over the header and the payload, keyed by the user's key (32)
    payload  the pickled state (torch.save's or cloudpickle's bytes)

:func:`verify` reads the header, checks the magic, the version, the identity (before
touching the payload), the length and the HMAC (a constant-time comparison), and only then
returns the payload to unpickle; a file that fails a check raises :class:`Refused`, saying
why.

The key: 32 random bytes (64 hex digits) in ``$RLSWEEP_KEY_FILE``, else
``$XDG_CONFIG_HOME/rlsweep/key``, else ``~/.config/rlsweep/key``, made on first use with
mode 0600. A cluster's home directory is shared between its nodes, so every node finds the
same key; where it is not, point ``RLSWEEP_KEY_FILE`` at one file every node reads. A key
file that is not the user's, or that others may read or write, is refused
(:class:`KeyFileError`): anyone who can read it can sign files as the user.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
import struct
from pathlib import Path

from rlsweep.errors import ConfigError, RLSweepError

KEY_ENV = "RLSWEEP_KEY_FILE"
MAGIC = b"RLSWEEP-SIG\n"
VERSION = 1
_HEADER = struct.Struct(">12sH32sQ")  # magic, version, identity's SHA-256, payload length
_MAC_SIZE = 32
_KEY_BYTES = 32


class KeyFileError(ConfigError):
    """The user's key file is unusable: not the user's, open to others, or not a key."""


class Refused(RLSweepError):
    """A file that is not loaded: the message says why."""


class OtherJob(Refused):
    """A signed file of another job (its header names another identity)."""


UNSIGNED = (
    "no rlsweep signature (written by an rlsweep older than signed checkpoints, or not "
    "rlsweep's): refused, as a file others may have planted"
)
FORGED = (
    "not signed by this user's key (or altered since): refused, as a file others may have planted"
)


# ------------------------------------------------------------------------------ the key


def key_path() -> Path:
    """Where the user's key is: ``$RLSWEEP_KEY_FILE``, else the user's config directory."""
    chosen = os.environ.get(KEY_ENV)
    if chosen:
        return Path(chosen).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(config) if os.path.isabs(config) else Path.home() / ".config"
    return base / "rlsweep" / "key"


def user_key() -> bytes:
    """The user's key, made (mode 0600) if there is none yet."""
    path = key_path()
    try:
        return _read_key(path)
    except FileNotFoundError:
        _create_key(path)
        return _read_key(path)


def _read_key(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise KeyFileError(f"rlsweep's key {path} is not a file.")
        if info.st_uid != os.getuid():
            raise KeyFileError(
                f"rlsweep's key {path} belongs to user id {info.st_uid}, not to you "
                f"({os.getuid()}): refused, as anyone who wrote it can sign checkpoints as you. "
                f"Delete it (rlsweep then makes one of yours) or set {KEY_ENV} to a file of yours."
            )
        if info.st_mode & 0o077:
            raise KeyFileError(
                f"rlsweep's key {path} is open to others (mode {stat.S_IMODE(info.st_mode):04o}): "
                "refused, as anyone who can read it can sign checkpoints as you. Run "
                f"`chmod 600 {path}`; if others may have read it, delete it instead (rlsweep "
                "makes a new one; checkpoints signed with the old one are then refused and "
                "their jobs start from scratch)."
            )
        text = f.read(4 * _KEY_BYTES).strip()
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) < _KEY_BYTES:
        raise KeyFileError(
            f"{path} is not an rlsweep key ({2 * _KEY_BYTES} hex digits): delete it and "
            "rlsweep makes one."
        )
    return key


def _create_key(path: Path) -> None:
    """Write a new key to ``path`` unless another process got there first (a temporary
    file linked into place, so that no reader sees a half-written key; where the file
    system has no hard links, written in place)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    text = (secrets.token_hex(_KEY_BYTES) + "\n").encode()
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        _write_new(tmp, text)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return  # another process made the key meanwhile: theirs is the key
        except OSError:  # no hard links here
            with contextlib.suppress(FileExistsError):
                _write_new(path, text)
    finally:
        tmp.unlink(missing_ok=True)


def _write_new(path: Path, data: bytes) -> None:
    """Create ``path`` (mode 0600; FileExistsError if it exists) holding ``data``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


# ------------------------------------------------------------------------ signed files


def _identity_hash(identity: str) -> bytes:
    return hashlib.sha256(identity.encode()).digest()


def sign(payload: bytes, identity: str) -> bytes:
    """``payload`` framed and signed for the job ``identity`` (its digest) with the user's key."""
    header = _HEADER.pack(MAGIC, VERSION, _identity_hash(identity), len(payload))
    mac = hmac.new(user_key(), header + payload, hashlib.sha256).digest()
    return header + mac + payload


def verify(data: bytes, identity: str) -> bytes:
    """The payload of ``data`` if it is signed with the user's key for the job ``identity``;
    else :class:`Refused` (:class:`OtherJob` if signed for another job)."""
    start = _HEADER.size + _MAC_SIZE
    if not data.startswith(MAGIC):
        if MAGIC.startswith(data[: len(MAGIC)]) and data:
            raise Refused(f"damaged (cut short: {len(data)} bytes)")
        raise Refused(UNSIGNED)
    if len(data) < start:
        raise Refused(f"damaged (cut short: {len(data)} bytes)")
    _, version, ident, length = _HEADER.unpack_from(data)
    if version != VERSION:
        raise Refused(f"signed in format {version}, this rlsweep reads format {VERSION}")
    if not hmac.compare_digest(ident, _identity_hash(identity)):
        raise OtherJob("not this job's")
    if len(data) != start + length:
        raise Refused(f"damaged ({len(data) - start} payload bytes, the header says {length})")
    expected = hmac.new(user_key(), data[: _HEADER.size] + data[start:], hashlib.sha256).digest()
    if not hmac.compare_digest(expected, data[_HEADER.size : start]):
        raise Refused(FORGED)
    return data[start:]


def read_verified(path: Path, identity: str, other: str) -> tuple[bytes | None, str]:
    """``(payload, "")`` of the file at ``path`` when :func:`verify` accepts it for the job
    ``identity``, else ``(None, why)``; ``other`` says what a file signed for another job is
    (``a checkpoint of a different config``)."""
    try:
        return verify(path.read_bytes(), identity), ""
    except OtherJob as exc:
        return None, f"{exc}: {other}"
    except (Refused, OSError) as exc:
        return None, str(exc)
