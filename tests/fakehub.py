"""A stand-in for the Hugging Face Hub endpoints a pull uses, served through respx.

The real huggingface_hub code runs (HfApi.get_paths_info / list_repo_tree, file_download.http_get);
only the transport answers from memory.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote

import httpx
import respx

ENDPOINT = "https://huggingface.co"


@dataclass
class HubFile:
    content: bytes
    sha256: str  # what the hub's LFS record claims; differs from the bytes to simulate corruption
    # Serve only this many bytes of the next full download, then drop the connection.
    cut_after: int | None = None


class _CutStream(httpx.SyncByteStream):
    def __init__(self, data: bytes) -> None:
        self._data = data

    def __iter__(self) -> Iterator[bytes]:
        yield self._data
        raise httpx.ReadError("connection reset by peer")


@dataclass
class FakeHub:
    router: respx.MockRouter
    repos: dict[str, dict[str, HubFile]] = field(default_factory=dict)
    downloads: list[httpx.Request] = field(default_factory=list)
    # Called as each file download starts (before any byte is sent): lets a test hold one open.
    before_download: Callable[[], None] = lambda: None

    def __post_init__(self) -> None:
        repo = r"(?P<repo>[^/]+/[^/]+)"
        self.router.post(url__regex=rf"^{ENDPOINT}/api/models/{repo}/paths-info/(?P<rev>[^/?]+)$").mock(
            side_effect=self._paths_info
        )
        self.router.get(url__regex=rf"^{ENDPOINT}/api/models/{repo}/tree/(?P<rev>[^/?]+)").mock(side_effect=self._tree)
        self.router.get(url__regex=rf"^{ENDPOINT}/{repo}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$").mock(
            side_effect=self._resolve
        )

    def add(self, repo: str, path: str, content: bytes, *, sha256: str | None = None) -> HubFile:
        file = HubFile(content, sha256 or hashlib.sha256(content).hexdigest())
        self.repos.setdefault(repo, {})[path] = file
        return file

    def _entry(self, path: str, file: HubFile) -> dict[str, object]:
        return {
            "type": "file",
            "oid": hashlib.sha1(file.content).hexdigest(),
            "size": len(file.content),
            "path": path,
            "lfs": {"oid": file.sha256, "size": len(file.content), "pointerSize": 134},
        }

    def _repo(self, request: httpx.Request, repo: str) -> dict[str, HubFile] | httpx.Response:
        if repo not in self.repos:
            return httpx.Response(404, headers={"X-Error-Code": "RepoNotFound"}, json={"error": "not found"})
        return self.repos[repo]

    def _paths_info(self, request: httpx.Request, repo: str, rev: str) -> httpx.Response:
        files = self._repo(request, repo)
        if isinstance(files, httpx.Response):
            return files
        wanted = parse_qs(request.content.decode()).get("paths", [])
        return httpx.Response(200, json=[self._entry(p, files[p]) for p in wanted if p in files])

    def _tree(self, request: httpx.Request, repo: str, rev: str) -> httpx.Response:
        files = self._repo(request, repo)
        if isinstance(files, httpx.Response):
            return files
        return httpx.Response(200, json=[self._entry(p, f) for p, f in files.items()])

    def _resolve(self, request: httpx.Request, repo: str, rev: str, path: str) -> httpx.Response:
        self.downloads.append(request)
        self.before_download()
        file = self.repos.get(repo, {}).get(unquote(path))
        if file is None:
            return httpx.Response(404, headers={"X-Error-Code": "EntryNotFound"})
        start = 0
        if m := re.fullmatch(r"bytes=(\d+)-", request.headers.get("Range", "")):
            start = int(m.group(1))
        body = file.content[start:]
        headers = {"Content-Length": str(len(body))}
        status = 206 if start else 200
        if file.cut_after is not None:
            cut, file.cut_after = body[: file.cut_after], None
            return httpx.Response(status, headers=headers, stream=_CutStream(cut))
        return httpx.Response(status, headers=headers, content=body)
