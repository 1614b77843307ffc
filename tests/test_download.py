"""corpora.download against a real HTTP server on 127.0.0.1 (no internet needed).

The server serves the shared corpora as ``/<NAME>/<filename>`` -- the layout a
mirror must have -- and can be told to serve wrong bytes, cut a body short, or
answer 404 for a path.
"""
from __future__ import annotations

import hashlib
import http.server
import io
import os
import threading
import time
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from corpora import download as dl
from corpora.errors import InputError
from corpora.registry import REGISTRY, CorpusSpec, RemoteFile

FAST = (5.0, 5.0)  # connect/read timeouts for the local server


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "ngramlm-test"

    def log_message(self, *args):  # keep test output clean
        pass

    def do_GET(self):
        srv = self.server
        path = self.path.split("?", 1)[0]
        srv.hits[path] += 1
        rule = srv.rules.get(path)
        if rule is None:
            name, _, filename = path.lstrip("/").partition("/")
            f = srv.root / name / filename
            if "/" in filename or ".." in path or not f.is_file():
                rule = ("status", 404)
            else:
                rule = ("bytes", f.read_bytes())
        kind = rule[0]
        if kind == "status":
            self.send_error(rule[1])
            return
        data = rule[1]
        claimed = rule[2] if kind == "truncate" else len(data)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(claimed))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        # HTTP/1.0: returning closes the connection -- mid-body when claimed > len(data).


class MirrorServer:
    def __init__(self, root: Path):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.root = root
        self.httpd.rules = {}
        self.httpd.hits = Counter()
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def rules(self) -> dict:
        return self.httpd.rules

    @property
    def hits(self) -> Counter:
        return self.httpd.hits

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def _server(shared_corpora):
    server = MirrorServer(shared_corpora)
    yield server
    server.close()


@pytest.fixture
def mirror(_server, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("NGRAMLM_DOWNLOAD_MIRROR", raising=False)
    monkeypatch.delenv("NGRAMLM_DATA_DIR", raising=False)
    _server.rules.clear()
    _server.hits.clear()
    yield _server
    _server.rules.clear()


def _listing(folder: Path) -> list:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


# ---------------------------------------------------------------------------- success
@pytest.mark.parametrize("name", ["timemachine", "hongloumeng", "ptb"])
def test_download_via_mirror_is_verified_and_byte_identical(mirror, shared_corpora, tmp_path, name):
    folder = dl.download_corpus(name, data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert folder == tmp_path / name
    spec = REGISTRY[name]
    expected = sorted(r.filename for r in spec.downloads)
    assert _listing(folder) == expected  # no stray .part files
    for r in spec.downloads:
        got = (folder / r.filename).read_bytes()
        assert got == (shared_corpora / name / r.filename).read_bytes()
        assert _sha256(got) == r.sha256
        assert len(got) == r.size
        assert mirror.hits[f"/{name}/{r.filename}"] == 1
    report = dl.verify_corpus(name, tmp_path)
    assert report["complete"] is True
    assert all(f["check"] == "sha256" and f["ok"] for f in report["files"])
    assert dl.download_status(spec, tmp_path) == "yes"


def test_mirror_from_environment_and_trailing_slash(mirror, shared_corpora, tmp_path, monkeypatch):
    monkeypatch.setenv("NGRAMLM_DOWNLOAD_MIRROR", mirror.url + "/")
    dl.download_corpus("timemachine", data_dir=tmp_path, progress=False, timeout=FAST)
    assert mirror.hits["/timemachine/timemachine.txt"] == 1
    assert (tmp_path / "timemachine" / "timemachine.txt").read_bytes() == \
        (shared_corpora / "timemachine" / "timemachine.txt").read_bytes()


def test_remote_url_uses_canonical_url_without_mirror(monkeypatch):
    monkeypatch.delenv("NGRAMLM_DOWNLOAD_MIRROR", raising=False)
    r = REGISTRY["ptb"].downloads[0]
    assert dl.remote_url("ptb", r) == r.url
    assert dl.remote_url("ptb", r, "http://m.example/x/") == "http://m.example/x/ptb/ptb.train.txt"


def test_download_is_usable_by_the_loader(mirror, tmp_path):
    from corpora import load_corpus, prepare

    dl.download_corpus("timemachine", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    ds = prepare(load_corpus("timemachine", data_dir=tmp_path))
    assert ds.vocab.n_types == 4201  # same as from the shared copy
    assert ds["test"].n_tokens == 3564


# ---------------------------------------------------------------------------- failures leave nothing
def test_checksum_mismatch_leaves_no_file(mirror, tmp_path):
    bad = b"this is not the time machine\n" * 100
    mirror.rules["/timemachine/timemachine.txt"] = ("bytes", bad)
    with pytest.raises(InputError) as info:
        dl.download_corpus("timemachine", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    msg = str(info.value)
    assert "checksum mismatch" in msg
    assert REGISTRY["timemachine"].downloads[0].sha256 in msg  # expected
    assert _sha256(bad) in msg  # got
    assert f"{mirror.url}/timemachine/timemachine.txt" in msg  # where from
    assert "fix:" in msg and "\n" not in msg
    assert _listing(tmp_path / "timemachine") == []  # no final file, no temp file
    assert dl.verify_corpus("timemachine", tmp_path)["complete"] is False
    assert dl.download_status(REGISTRY["timemachine"], tmp_path) == "no"


def test_connection_dropped_mid_body_leaves_no_file(mirror, shared_corpora, tmp_path):
    data = (shared_corpora / "timemachine" / "timemachine.txt").read_bytes()
    mirror.rules["/timemachine/timemachine.txt"] = ("truncate", data[:50_000], len(data))
    with pytest.raises(InputError) as info:
        dl.download_corpus("timemachine", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    msg = str(info.value)
    assert "interrupted" in msg or "incomplete" in msg
    assert f"{len(data)}" in msg
    assert "timemachine.txt" in msg
    assert _listing(tmp_path / "timemachine") == []


def test_truncated_file_of_the_right_length_claim_is_still_rejected(mirror, shared_corpora, tmp_path):
    # A short body whose Content-Length matches it: complete as HTTP goes, but the checksum catches it.
    data = (shared_corpora / "timemachine" / "timemachine.txt").read_bytes()[:1000]
    mirror.rules["/timemachine/timemachine.txt"] = ("bytes", data)
    with pytest.raises(InputError, match="checksum mismatch.*1000 bytes, expected 178979"):
        dl.download_corpus("timemachine", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert _listing(tmp_path / "timemachine") == []


def test_http_error_and_unreachable_server(mirror, tmp_path):
    mirror.rules["/timemachine/timemachine.txt"] = ("status", 404)
    with pytest.raises(InputError, match="HTTP 404"):
        dl.download_corpus("timemachine", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert _listing(tmp_path / "timemachine") == []

    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(InputError, match="could not connect"):
        dl.download_corpus("timemachine", data_dir=tmp_path, base_url=f"http://127.0.0.1:{port}",
                           progress=False, timeout=FAST)
    assert _listing(tmp_path / "timemachine") == []


def test_one_bad_file_makes_the_corpus_partial_not_complete(mirror, tmp_path):
    mirror.rules["/ptb/ptb.test.txt"] = ("bytes", b"corrupted\n")
    with pytest.raises(InputError, match="ptb.test.txt"):
        dl.download_corpus("ptb", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert _listing(tmp_path / "ptb") == ["ptb.train.txt", "ptb.valid.txt"]
    report = dl.verify_corpus("ptb", tmp_path)
    assert report["complete"] is False
    assert [f["ok"] for f in report["files"]] == [True, True, False]
    assert dl.download_status(REGISTRY["ptb"], tmp_path) == "partial"
    # The loader refuses it and says how to fix it.
    from corpora import load_corpus

    with pytest.raises(InputError, match="corpora download ptb"):
        load_corpus("ptb", data_dir=tmp_path)
    # Once the server is fixed, the verified files are skipped and only the missing one is fetched.
    mirror.rules.clear()
    mirror.hits.clear()
    dl.download_corpus("ptb", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert dict(mirror.hits) == {"/ptb/ptb.test.txt": 1}
    assert dl.verify_corpus("ptb", tmp_path)["complete"] is True


# ---------------------------------------------------------------------------- skip / force
def test_skip_if_present_and_force(mirror, tmp_path):
    path = tmp_path / "timemachine" / "timemachine.txt"
    dl.download_corpus("timemachine", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert mirror.hits["/timemachine/timemachine.txt"] == 1
    lines = []
    dl.download_corpus("timemachine", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST,
                       log=lines.append)
    assert mirror.hits["/timemachine/timemachine.txt"] == 1  # verified present: not fetched
    assert "skipped" in lines[0]
    inode = path.stat().st_ino
    dl.download_corpus("timemachine", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST,
                       force=True)
    assert mirror.hits["/timemachine/timemachine.txt"] == 2
    assert path.stat().st_ino != inode  # replaced by a fresh, verified copy
    assert _sha256(path.read_bytes()) == REGISTRY["timemachine"].downloads[0].sha256
    assert _listing(path.parent) == ["timemachine.txt"]


def test_modified_local_file_is_fetched_again(mirror, tmp_path):
    folder = tmp_path / "timemachine"
    folder.mkdir()
    (folder / "timemachine.txt").write_text("edited by hand\n")
    assert dl.download_status(REGISTRY["timemachine"], tmp_path) == "modified"
    dl.download_corpus("timemachine", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert mirror.hits["/timemachine/timemachine.txt"] == 1
    assert dl.verify_corpus("timemachine", tmp_path)["complete"] is True


def test_force_with_a_bad_server_keeps_the_good_copy(mirror, tmp_path):
    dl.download_corpus("timemachine", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    mirror.rules["/timemachine/timemachine.txt"] = ("bytes", b"garbage\n")
    with pytest.raises(InputError, match="checksum mismatch"):
        dl.download_corpus("timemachine", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST,
                           force=True)
    assert dl.verify_corpus("timemachine", tmp_path)["complete"] is True
    assert _listing(tmp_path / "timemachine") == ["timemachine.txt"]


def test_stale_part_files_are_removed(mirror, tmp_path):
    folder = tmp_path / "timemachine"
    folder.mkdir()
    stale = folder / ".timemachine.txt.abc123.part"
    stale.write_bytes(b"half a download")
    old = time.time() - 2 * dl.STALE_PART_SECONDS
    os.utime(stale, (old, old))
    assert dl.verify_corpus("timemachine", tmp_path)["stray"] == [stale]
    dl.download_corpus("timemachine", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert _listing(folder) == ["timemachine.txt"]


def test_generated_corpus_has_nothing_to_download(tmp_path):
    with pytest.raises(InputError, match="nothing to download"):
        dl.download_corpus("toy", data_dir=tmp_path)
    with pytest.raises(InputError, match="unknown corpus"):
        dl.download_corpus("no-such-corpus", data_dir=tmp_path)


# ---------------------------------------------------------------------------- zip archives
def _zip_bytes(members: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.fixture
def zip_corpus(mirror, monkeypatch):
    members = {
        "pack/wiki.train.tokens": " = Title = \n\n the cat sat on the mat \n",
        "pack/wiki.valid.tokens": " the dog sat \n",
        "pack/wiki.test.tokens": " a cat ran \n",
        "pack/README": "not extracted\n",
    }
    archive = _zip_bytes(members)
    spec = CorpusSpec(
        name="tinyzip",
        description="test archive",
        files={"train": "wiki.train.tokens", "valid": "wiki.valid.tokens", "test": "wiki.test.tokens"},
        downloads=(RemoteFile(
            "https://example.invalid/data/tinyzip-v1.zip", _sha256(archive), "tinyzip-v1.zip",
            extract={"pack/wiki.train.tokens": "wiki.train.tokens", "pack/wiki.valid.tokens": "wiki.valid.tokens",
                     "pack/wiki.test.tokens": "wiki.test.tokens"},
            size=len(archive),
        ),),
        keep_empty_lines=True,
        unk_token="<unk>",
    )
    monkeypatch.setitem(REGISTRY, "tinyzip", spec)
    mirror.rules["/tinyzip/tinyzip-v1.zip"] = ("bytes", archive)
    return spec, members, archive


def test_zip_archive_is_verified_extracted_and_not_kept(zip_corpus, mirror, tmp_path):
    spec, members, _ = zip_corpus
    folder = dl.download_corpus("tinyzip", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert _listing(folder) == ["wiki.test.tokens", "wiki.train.tokens", "wiki.valid.tokens"]
    for member, local in spec.downloads[0].extract.items():
        assert (folder / local).read_text() == members[member]
    report = dl.verify_corpus("tinyzip", tmp_path)
    assert report["complete"] is True
    assert {f["check"] for f in report["files"]} == {"presence"}  # the checksum is the archive's
    # Present: skipped.  --force: fetched again.
    dl.download_corpus("tinyzip", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert mirror.hits["/tinyzip/tinyzip-v1.zip"] == 1
    dl.download_corpus("tinyzip", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST, force=True)
    assert mirror.hits["/tinyzip/tinyzip-v1.zip"] == 2
    # The loader reads the extracted files (WikiText keeps empty lines as sentences).
    from corpora import load_corpus

    corpus = load_corpus("tinyzip", data_dir=tmp_path)
    assert corpus.splits["train"] == [["=", "Title", "="], [], ["the", "cat", "sat", "on", "the", "mat"]]


def test_zip_with_wrong_checksum_extracts_nothing(zip_corpus, mirror, tmp_path):
    _, members, _ = zip_corpus
    mirror.rules["/tinyzip/tinyzip-v1.zip"] = ("bytes", _zip_bytes({k: v.upper() for k, v in members.items()}))
    with pytest.raises(InputError, match="checksum mismatch"):
        dl.download_corpus("tinyzip", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert _listing(tmp_path / "tinyzip") == []


def test_zip_missing_member_is_reported(mirror, monkeypatch, tmp_path):
    archive = _zip_bytes({"other/file.txt": "x\n"})
    spec = CorpusSpec(name="badzip", description="", files={"train": "a.txt", "valid": "a.txt", "test": "a.txt"},
                      downloads=(RemoteFile("https://example.invalid/badzip.zip", _sha256(archive), "badzip.zip",
                                            extract={"pack/a.txt": "a.txt"}),))
    monkeypatch.setitem(REGISTRY, "badzip", spec)
    mirror.rules["/badzip/badzip.zip"] = ("bytes", archive)
    with pytest.raises(InputError, match="no member 'pack/a.txt'"):
        dl.download_corpus("badzip", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert _listing(tmp_path / "badzip") == []


# ---------------------------------------------------------------------------- the CLI
def test_cli_download_end_to_end(mirror, shared_corpora, tmp_path, run_cli):
    code, out, err = run_cli("corpora", "download", "timemachine", "--mirror", mirror.url, "--data-dir", tmp_path)
    assert code == 0, err
    assert f"timemachine: ready in {tmp_path / 'timemachine'}" in out
    assert "sha256 ok" in out
    assert (tmp_path / "timemachine" / "timemachine.txt").read_bytes() == \
        (shared_corpora / "timemachine" / "timemachine.txt").read_bytes()

    code, out, _ = run_cli("corpora", "download", "timemachine", "--mirror", mirror.url, "--data-dir", tmp_path)
    assert code == 0 and "skipped" in out
    assert mirror.hits["/timemachine/timemachine.txt"] == 1

    code, out, _ = run_cli("corpora", "list", "--data-dir", tmp_path)
    assert code == 0
    status = {line.split()[0]: line.split()[1] for line in out.splitlines()[2:]}
    assert status["timemachine"] == "yes" and status["ptb"] == "no" and status["toy"] == "built-in"

    code, out, _ = run_cli("corpora", "info", "timemachine", "--data-dir", tmp_path)
    assert code == 0
    assert "timemachine.txt: sha256 ok  178,979 bytes, 3,221 lines, 32,306 whitespace tokens" in out
    assert "status: complete" in out


def test_cli_download_failure_is_one_line_and_leaves_nothing(mirror, tmp_path, run_cli):
    mirror.rules["/timemachine/timemachine.txt"] = ("bytes", b"wrong\n")
    code, out, err = run_cli("corpora", "download", "timemachine", "--mirror", mirror.url, "--data-dir", tmp_path)
    assert code == 2
    assert err.startswith("Error: ") and err.count("\n") == 1
    assert "timemachine.txt" in err and "checksum mismatch" in err
    assert _listing(tmp_path / "timemachine") == []


def test_cli_download_env_mirror_and_bad_mirror(mirror, tmp_path, run_cli, monkeypatch):
    code, _, err = run_cli("corpora", "download", "timemachine", "--mirror", "ftp://nowhere", "--data-dir", tmp_path)
    assert code == 2 and "not an http(s) URL" in err
    code, out, _ = run_cli("corpora", "download", "toy", "--data-dir", tmp_path)
    assert code == 0 and "nothing to download" in out
    monkeypatch.setenv("NGRAMLM_DATA_DIR", str(tmp_path / "from-env"))
    monkeypatch.setenv("NGRAMLM_DOWNLOAD_MIRROR", mirror.url)
    # Both settings can come from the environment.
    dl.download_corpus("timemachine", progress=False, timeout=FAST)
    assert (tmp_path / "from-env" / "timemachine" / "timemachine.txt").is_file()


# ---------------------------------------------------------------------------- head_lines (fra-eng)
FRA = REGISTRY["fra-eng"].downloads[0]


@pytest.fixture
def fra_eng_bytes(shared_corpora):
    path = shared_corpora / "fra-eng" / "fra-eng.tsv"
    if not path.is_file():
        pytest.skip(f"{path} not found (set NGRAMLM_TEST_CORPORA)")
    return path.read_bytes()


@pytest.fixture
def tmp_mirror(tmp_path, monkeypatch):
    """A second server, on a folder of the test's own, laid out like a mirror."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("NGRAMLM_DOWNLOAD_MIRROR", raising=False)
    root = tmp_path / "served"
    root.mkdir()
    server = MirrorServer(root)
    yield server, root
    server.close()


def test_fra_eng_download_via_mirror_keeps_the_head_and_verifies(mirror, fra_eng_bytes, tmp_path):
    lines = []
    folder = dl.download_corpus("fra-eng", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST,
                                log=lines.append)
    assert FRA.head_lines == 5000 and FRA.size == len(fra_eng_bytes) == 562_864
    assert _listing(folder) == ["fra-eng.tsv"]
    got = (folder / "fra-eng.tsv").read_bytes()
    assert got == fra_eng_bytes and _sha256(got) == FRA.sha256
    assert mirror.hits["/fra-eng/fra-eng.tsv"] == 1
    assert "first 5,000 lines, 562,864 bytes, sha256 ok" in lines[0]
    assert dl.verify_corpus("fra-eng", tmp_path)["complete"] is True
    assert dl.download_status(REGISTRY["fra-eng"], tmp_path) == "yes"
    # Verified present: skipped.  And the loader reads the downloaded copy.
    dl.download_corpus("fra-eng", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert mirror.hits["/fra-eng/fra-eng.tsv"] == 1
    from corpora.parallel import load_parallel

    assert load_parallel("fra-eng", data_dir=tmp_path).sizes()["test"]["pairs"] == 500


@pytest.mark.parametrize("extra", [b"Extra line.\tLigne en plus.\tattribution\n" * 20_000,
                                   b"One more.\tEncore une.",  # the upstream tail need not end in a newline
                                   b""])
def test_fra_eng_from_a_longer_upstream_file_keeps_5000_lines(tmp_mirror, fra_eng_bytes, tmp_path, extra):
    # The real source is the full pair file (~200k lines): only its first 5,000 lines are kept and checked.
    server, root = tmp_mirror
    (root / "fra-eng").mkdir()
    (root / "fra-eng" / "fra-eng.tsv").write_bytes(fra_eng_bytes + extra)
    data_dir = tmp_path / "data"
    dl.download_corpus("fra-eng", data_dir=data_dir, base_url=server.url, progress=False, timeout=FAST)
    got = (data_dir / "fra-eng" / "fra-eng.tsv").read_bytes()
    assert got == fra_eng_bytes and _sha256(got) == FRA.sha256 and got.count(b"\n") == 5000
    assert _listing(data_dir / "fra-eng") == ["fra-eng.tsv"]
    assert server.hits["/fra-eng/fra-eng.tsv"] == 1


def test_fra_eng_shorter_or_different_file_is_rejected(mirror, fra_eng_bytes, tmp_path):
    head = b"".join(fra_eng_bytes.splitlines(keepends=True)[:4000])
    mirror.rules["/fra-eng/fra-eng.tsv"] = ("bytes", head)
    with pytest.raises(InputError) as info:
        dl.download_corpus("fra-eng", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    msg = str(info.value)
    assert "checksum mismatch" in msg and FRA.sha256 in msg
    assert "the file has only 4,000 lines, 5,000 are kept" in msg
    assert _listing(tmp_path / "fra-eng") == []
    # 5,000+ lines whose head differs by one byte: the checksum of the kept lines catches it.
    mirror.rules["/fra-eng/fra-eng.tsv"] = ("bytes", fra_eng_bytes.replace(b"Va !", b"Va!", 1) + b"more\tplus\n")
    with pytest.raises(InputError, match="checksum mismatch.*the first 5,000 lines"):
        dl.download_corpus("fra-eng", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert _listing(tmp_path / "fra-eng") == []
    # A connection dropped before the 5,000th line is an interrupted download, not a short file.
    mirror.rules["/fra-eng/fra-eng.tsv"] = ("truncate", fra_eng_bytes[:300_000], len(fra_eng_bytes) + 100)
    with pytest.raises(InputError, match="interrupted|incomplete"):
        dl.download_corpus("fra-eng", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert _listing(tmp_path / "fra-eng") == []


@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_head_lines_cut_falls_anywhere_in_a_chunk(mirror, monkeypatch, tmp_path, chunk):
    body = b"a\tb\nc\td\ne\tf\ng\th\n"
    kept = b"a\tb\nc\td\ne\tf\n"
    spec = CorpusSpec(name="headtest", description="", files={"train": "h.tsv", "valid": "h.tsv", "test": "h.tsv"},
                      downloads=(RemoteFile("https://example.invalid/h.tsv", _sha256(kept), "h.tsv", head_lines=3),))
    monkeypatch.setitem(REGISTRY, "headtest", spec)
    monkeypatch.setattr(dl, "CHUNK_SIZE", chunk)
    mirror.rules["/headtest/h.tsv"] = ("bytes", body)
    dl.download_corpus("headtest", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert (tmp_path / "headtest" / "h.tsv").read_bytes() == kept
    # Exactly the head, without a final newline, is accepted when that is what the checksum says.
    spec2 = CorpusSpec(name="headtest2", description="", files=spec.files,
                       downloads=(RemoteFile("https://example.invalid/h.tsv", _sha256(b"a\tb\nc\td"), "h.tsv",
                                             head_lines=2),))
    monkeypatch.setitem(REGISTRY, "headtest2", spec2)
    mirror.rules["/headtest2/h.tsv"] = ("bytes", b"a\tb\nc\td")
    dl.download_corpus("headtest2", data_dir=tmp_path, base_url=mirror.url, progress=False, timeout=FAST)
    assert (tmp_path / "headtest2" / "h.tsv").read_bytes() == b"a\tb\nc\td"


def test_cli_download_fra_eng(mirror, fra_eng_bytes, tmp_path, run_cli):
    code, out, err = run_cli("corpora", "download", "fra-eng", "--mirror", mirror.url, "--data-dir", tmp_path)
    assert code == 0, err
    assert f"fra-eng: ready in {tmp_path / 'fra-eng'}" in out and "first 5,000 lines" in out
    assert (tmp_path / "fra-eng" / "fra-eng.tsv").read_bytes() == fra_eng_bytes
    code, out, _ = run_cli("corpora", "info", "fra-eng", "--data-dir", tmp_path)
    assert code == 0 and "fra-eng.tsv: sha256 ok  562,864 bytes, 5,000 lines" in out and "status: complete" in out
