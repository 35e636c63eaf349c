"""The data files: the registry, local folder, cache, download, checksums, archives, and
the registry against the real data folder's manifest.

The failure paths use only files these tests create (toy datasets with ``file://`` URLs);
nothing here touches the network. The last tests read the real datasets from
``$TRANSFORMER_BOOK_DATA`` (CI sets it) and are skipped only where it is unset.
"""

import hashlib
import io
import os
import tarfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from transformer_book import data_files

REAL_DATA = os.environ.get(data_files.DATA_ENV)
needs_real_data = pytest.mark.skipif(
    not REAL_DATA, reason=f"${data_files.DATA_ENV} is not set"
)


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def toy(
    url: str, content: bytes, name: str = "split/a.txt", **kw
) -> data_files.Dataset:
    return data_files.Dataset(
        "toy", (data_files.DataFile(name, url, (sha(content),), **kw),)
    )


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    """A fresh cache, no local data folder, and a source folder for file:// "downloads"."""
    cache, src = tmp_path / "cache", tmp_path / "src"
    src.mkdir()
    monkeypatch.setenv(data_files.CACHE_ENV, str(cache))
    monkeypatch.delenv(data_files.DATA_ENV, raising=False)
    return cache, src


def no_download(url, dest):
    raise AssertionError(f"unexpected download of {url}")


def test_reads_the_local_folder_first_and_checks_it(tmp_path, dirs, monkeypatch):
    local = tmp_path / "local"
    (local / "toy" / "split").mkdir(parents=True)
    (local / "toy" / "split" / "a.txt").write_bytes(b"hello\n")
    monkeypatch.setenv(data_files.DATA_ENV, str(local))
    monkeypatch.setattr(data_files, "_download", no_download)
    ds = toy("https://example.invalid/a.txt", b"hello\n")
    assert data_files.path(ds, "split/a.txt") == local / "toy" / "split" / "a.txt"
    assert data_files.read_text(ds, "split/a.txt") == "hello\n"

    (local / "toy" / "split" / "a.txt").write_bytes(b"tampered\n")
    with pytest.raises(data_files.ChecksumError) as err:
        data_files.path(ds, "split/a.txt")
    msg = str(err.value)
    assert (
        "toy/split/a.txt" in msg
        and sha(b"hello\n") in msg
        and sha(b"tampered\n") in msg
    )
    assert (
        local / "toy" / "split" / "a.txt"
    ).exists()  # the user's own file is reported, not deleted


def test_download_into_the_cache_with_a_file_url(dirs, monkeypatch):
    cache, src = dirs
    (src / "a.txt").write_bytes(b"some data\n")
    ds = toy((src / "a.txt").as_uri(), b"some data\n")
    got = data_files.path(ds, "split/a.txt")
    assert (
        got == cache / "toy" / "split" / "a.txt" and got.read_bytes() == b"some data\n"
    )
    monkeypatch.setattr(
        data_files, "_download", no_download
    )  # the second time it comes from the cache
    assert data_files.path(ds, "split/a.txt") == got


def test_local_folder_without_the_file_falls_back_to_the_cache(
    tmp_path, dirs, monkeypatch
):
    cache, src = dirs
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv(data_files.DATA_ENV, str(tmp_path / "empty"))
    (src / "a.txt").write_bytes(b"x")
    assert (
        data_files.path(toy((src / "a.txt").as_uri(), b"x"), "split/a.txt")
        == cache / "toy" / "split" / "a.txt"
    )


def test_explicit_cache_argument(tmp_path, dirs):
    _, src = dirs
    (src / "a.txt").write_bytes(b"x")
    got = data_files.path(
        toy((src / "a.txt").as_uri(), b"x"), "split/a.txt", cache=tmp_path / "elsewhere"
    )
    assert got == tmp_path / "elsewhere" / "toy" / "split" / "a.txt"


def test_download_with_the_wrong_checksum_is_not_kept(dirs):
    cache, src = dirs
    (src / "a.txt").write_bytes(b"not what was registered\n")
    ds = toy((src / "a.txt").as_uri(), b"the registered content\n")
    with pytest.raises(data_files.ChecksumError) as err:
        data_files.path(ds, "split/a.txt")
    msg = str(err.value)
    assert "toy/split/a.txt" in msg
    assert (
        sha(b"the registered content\n") in msg
        and sha(b"not what was registered\n") in msg
    )
    assert "deleted" in msg
    assert not any(p.is_file() for p in cache.rglob("*")), (
        "neither the file nor a partial download may stay"
    )


def test_corrupted_cache_file_is_reported(dirs):
    cache, src = dirs
    (cache / "toy" / "split").mkdir(parents=True)
    (cache / "toy" / "split" / "a.txt").write_bytes(b"truncat")
    with pytest.raises(
        data_files.ChecksumError, match="delete it to download it again"
    ):
        data_files.path(
            toy("https://example.invalid/a.txt", b"truncated\n"), "split/a.txt"
        )


def test_offline_without_a_local_copy(dirs, monkeypatch):
    def offline(url, *args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(
        urllib.request, "urlopen", offline
    )  # the real _download runs and fails
    url = "https://example.invalid/data/a.txt"
    with pytest.raises(data_files.DataUnavailableError) as err:
        data_files.path(toy(url, b"x"), "split/a.txt")
    msg = str(err.value)
    assert "toy/split/a.txt" in msg and url in msg and data_files.DATA_ENV in msg
    cache, _ = dirs
    assert not any(p.is_file() for p in cache.rglob("*"))


def test_offline_message_names_the_folder_that_was_searched(
    tmp_path, dirs, monkeypatch
):
    monkeypatch.setenv(data_files.DATA_ENV, str(tmp_path / "my-data"))
    monkeypatch.setattr(
        data_files,
        "_download",
        lambda url, dest: (_ for _ in ()).throw(OSError("network is unreachable")),
    )
    with pytest.raises(data_files.DataUnavailableError, match="my-data"):
        data_files.path(toy("https://example.invalid/a.txt", b"x"), "split/a.txt")


def make_tar(path: Path, members: dict) -> None:
    with tarfile.open(path, "w:gz") as tf:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tf.addfile(info, io.BytesIO(content))


def make_zip(path: Path, members: dict) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, content in members.items():
            zf.writestr(name, content)


@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_archive_member_is_extracted_and_checked(dirs, monkeypatch, kind):
    cache, src = dirs
    archive = src / ("pack.tar.gz" if kind == "tar" else "pack.zip")
    (make_tar if kind == "tar" else make_zip)(
        archive,
        {"pack/neg.txt": "caf\xe9\n".encode("cp1252"), "pack/pos.txt": b"good\n"},
    )
    url = archive.as_uri()
    ds = data_files.Dataset(
        "toy",
        (
            data_files.DataFile(
                "neg.txt",
                url,
                (sha("caf\xe9\n".encode("cp1252")),),
                member="pack/neg.txt",
                encoding="cp1252",
            ),
            data_files.DataFile(
                "pos.txt", url, (sha(b"good\n"),), member="other-top-folder/pos.txt"
            ),  # found by file name
        ),
    )
    assert data_files.read_text(ds, "neg.txt") == "caf\xe9\n"  # decoded as cp1252
    monkeypatch.setattr(
        data_files, "_download", no_download
    )  # the archive is downloaded once, then reused
    assert data_files.path(ds, "pos.txt").read_bytes() == b"good\n"
    assert (cache / "toy" / "_archives" / archive.name).is_file()


def test_archive_without_the_member(dirs):
    _, src = dirs
    make_zip(src / "pack.zip", {"pack/other.txt": b"x"})
    ds = toy(
        (src / "pack.zip").as_uri(), b"x", name="missing.txt", member="pack/missing.txt"
    )
    with pytest.raises(data_files.DataError, match="no member 'pack/missing.txt'"):
        data_files.path(ds, "missing.txt")


def test_unknown_names():
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        data_files.path("nope", "a.txt")
    with pytest.raises(ValueError, match="has no file 'train/nope'"):
        data_files.path("atis", "train/nope")


def test_registry():
    assert {"atis", "snips", "tinyshakespeare", "sst2", "rt-polarity"} <= set(
        data_files.DATASETS
    )
    for ds in data_files.DATASETS.values():
        for f in ds.files:
            assert f.sha256 and all(
                len(d) == 64 and int(d, 16) >= 0 for d in f.sha256
            ), f
            assert f.url.startswith(("https://", "http://"))
    rt = data_files.DATASETS["rt-polarity"].files
    assert all(
        f.member and f.encoding == "cp1252" and f.url.endswith(".tar.gz") for f in rt
    )
    assert all(
        f.member and f.url.endswith(".zip") for f in data_files.DATASETS["sst2"].files
    )
    assert len(data_files.DATASETS["atis"].files) == 11


def test_register_adds_a_dataset(dirs, monkeypatch):
    _, src = dirs
    (src / "a.txt").write_bytes(b"x")
    ds = toy((src / "a.txt").as_uri(), b"x")
    monkeypatch.setitem(data_files.DATASETS, "toy", ds)
    assert (
        data_files.register(ds) is ds
        and data_files.read_text("toy", "split/a.txt") == "x"
    )


# --- the real data folder, $TRANSFORMER_BOOK_DATA ----------------------------------------


@needs_real_data
def test_registry_matches_the_manifest_of_the_data_folder():
    manifest = Path(REAL_DATA) / "MANIFEST.tsv"
    if not manifest.exists():
        pytest.skip(f"no MANIFEST.tsv in {REAL_DATA}")
    rows = [
        line.split("\t")
        for line in manifest.read_text().splitlines()[1:]
        if line.strip()
    ]
    for dataset, file, _, digest, url in rows:
        f = data_files.DATASETS[dataset].file(file)
        assert digest in f.sha256 and f.url == url
