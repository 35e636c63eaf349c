"""The book's data files: where each comes from, how it is checked, where it is kept.

Every file has a canonical URL and a sha256 digest, registered in :data:`DATASETS` under
its dataset's name. :func:`path` finds a file in this order:

1. the folder named by the environment variable ``TRANSFORMER_BOOK_DATA``, laid out as
   ``<folder>/<dataset>/<file>`` (e.g. ``$TRANSFORMER_BOOK_DATA/atis/train/seq.in``);
2. the user cache, ``~/.cache/transformer_book/<dataset>/<file>`` (or ``$TRANSFORMER_BOOK_CACHE``);
3. otherwise the file is downloaded from its canonical URL into the cache.

The digest is checked in all three cases; a download that does not match is deleted, never kept.

Archives: some datasets are published only as an archive (rt-polarity as a ``.tar.gz``, SST-2 as
a ``.zip``). For those the registry names the member inside the archive; the archive is
downloaded once into ``<cache>/<dataset>/_archives/`` and the member extracted and checked.
The digests are those of the extracted files, not of the archive.

What the files hold, read as sentences, tags and labels, is :mod:`transformer_book.data`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DataFile",
    "Dataset",
    "DATASETS",
    "DATA_ENV",
    "CACHE_ENV",
    "DataError",
    "ChecksumError",
    "DataUnavailableError",
    "register",
    "data_dir",
    "cache_dir",
    "sha256_of",
    "path",
    "read_text",
]

DATA_ENV = "TRANSFORMER_BOOK_DATA"
CACHE_ENV = "TRANSFORMER_BOOK_CACHE"


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset: its path in the dataset folder, where to get it, and its
    accepted digests."""

    name: str  # e.g. "train/seq.in"
    url: str  # the canonical address: the file itself, or an archive that holds it
    sha256: tuple[str, ...]  # accepted sha256 digests of the file (not of an archive)
    member: str | None = (
        None  # the file's path inside the archive at `url`; None when `url` is the file
    )
    encoding: str = "utf-8"


@dataclass(frozen=True)
class Dataset:
    """A named set of files."""

    name: str
    files: tuple[DataFile, ...]

    def file(self, name: str) -> DataFile:
        for f in self.files:
            if f.name == name:
                return f
        raise ValueError(
            f"dataset {self.name!r} has no file {name!r}; "
            f"its files are {[f.name for f in self.files]}"
        )


class DataError(RuntimeError):
    """A dataset file could not be provided."""


class ChecksumError(DataError):
    """A file's sha256 digest is not the registered one."""


class DataUnavailableError(DataError):
    """A file is neither on disk nor downloadable (for example, offline)."""


_JOINTBERT = "https://raw.githubusercontent.com/monologg/JointBERT/master/data"
# sha256 of the JointBERT copies (Goo et al., 2018 split), from shared/data/MANIFEST.tsv
_SLOT_INTENT_DIGESTS = {
    "atis": {
        "dev/label": "06957cfe6fdffac84f8280bc3a1f8ca85c85631b363817aa4543aac611f8addf",
        "dev/seq.in": "c7435b96e7948393608c34819628e863c5338f11ca68e8f896d2cc041d8e17f8",
        "dev/seq.out": "83ccff3e36f83a993f8e5b5b82adf3256076f234abda4d784051381d7ac76922",
        "intent_label.txt": "d4e228c803961a6939ceaa5c791e7730457c92480687144bdfd10e4d0d9b8284",
        "slot_label.txt": "3986c69b49e5895826fa021e5dc57382e6e9724ef58182b418997ca0cacbbcb3",
        "test/label": "ce4bfe6590d9498e1078f30b4137d3e8b3e94277b444b26360c0bf2e9e282761",
        "test/seq.in": "4b2119fc59c37f9398c6605db435d4f467505009e6ee3e5af04fed09f39dc397",
        "test/seq.out": "a4690d6bceadc06876d1ff99bc401744aa981cb321e598ae12a3859d7be53254",
        "train/label": "d0a771547665eecbdf9f96ea015ef07d1f6ee9f063e861020dafabb3c2a04377",
        "train/seq.in": "3a670980841b21ab39088b2595efc17d487cdc45769c075a3e5f9458bba28c7f",
        "train/seq.out": "14c7131bd66562f797dbd7189bc7358f0cf354c6afb0785a9ab973c35b58f34c",
    },
    "snips": {
        "dev/label": "9c1dd041216f647bcfca838aaf1a48eb5781e4404256d31ff07cd38a5436c52f",
        "dev/seq.in": "64e0f6d8ad8aab3a3828164d7d53731a0993d3ca1aed437ceaca6d3d568d410e",
        "dev/seq.out": "712e6d34feb8d52d208b820a5f8bae6e6ff990f08374507dfde22de389088319",
        "intent_label.txt": "65e97527fa7048ee19a5a9a030c1feb43846ac48a99d2efeacbf44b9dd6014e8",
        "slot_label.txt": "d355b87d41fe23ff1c9d81e419333387590a305b32f7431df170deb379614d26",
        "test/label": "37a26da3ad079bb41c42c85a3a8f827eb47efec4c5917ce5d08f4b2736e4f830",
        "test/seq.in": "c1e341173fcea2951a8ca371956a6f81c76de87b9583c62eb87edd6158fa3a7c",
        "test/seq.out": "58c07c9097d5e1f78889765c2a535a160f6455b90b3142055c8051847afcca47",
        "train/label": "bfd7df6cf9dd76c5da5d8b61bc85f90386197bdd3d7510c1d324c051537b962f",
        "train/seq.in": "04ad1e3f2121d83c6478f9a4b17d2dbdc21d06d6127f73cb7af835ed733f9855",
        "train/seq.out": "fd5f2121d8055827e5d6b3d3bac30f3d7e94e82a5d437751960cbdd9e1b4f6d3",
    },
}
_RT_TARBALL = (
    "http://www.cs.cornell.edu/people/pabo/movie-review-data/rt-polaritydata.tar.gz"
)
_SST2_ZIP = "https://dl.fbaipublicfiles.com/glue/data/SST-2.zip"

DATASETS: dict[str, Dataset] = {
    name: Dataset(
        name,
        tuple(
            DataFile(f, f"{_JOINTBERT}/{name}/{f}", (d,)) for f, d in digests.items()
        ),
    )
    for name, digests in _SLOT_INTENT_DIGESTS.items()
}
DATASETS["tinyshakespeare"] = Dataset(
    "tinyshakespeare",
    (
        DataFile(
            "input.txt",
            "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
            ("86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",),
        ),
    ),
)
DATASETS["rt-polarity"] = Dataset(
    "rt-polarity",
    (  # Pang and Lee (2005); the text is Windows-1252, not UTF-8
        DataFile(
            "rt-polarity.neg",
            _RT_TARBALL,
            ("4af43bf489620b498a0852c5a8c6a535155dec7985fdfea782b8f7756b957ccc",),
            member="rt-polaritydata/rt-polarity.neg",
            encoding="cp1252",
        ),
        DataFile(
            "rt-polarity.pos",
            _RT_TARBALL,
            ("d79ef14009bbf87cd6be21f91c3ea1a3cbcb73b34dfb4231aef7bbcd7677abc4",),
            member="rt-polaritydata/rt-polarity.pos",
            encoding="cp1252",
        ),
        DataFile(
            "rt-polaritydata.README.1.0.txt",
            _RT_TARBALL,
            ("67bc8e858b247a20eb5d6dec39d1fca89ea36112872b48ac8fddfb599dadbf49",),
            member="rt-polaritydata.README.1.0.txt",
            encoding="cp1252",
        ),
    ),
)
DATASETS["sst2"] = Dataset(
    "sst2",
    (  # GLUE's SST-2 (Socher et al., 2013; Wang et al., 2019)
        DataFile(
            "dev.tsv",
            _SST2_ZIP,
            ("54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0",),
            member="SST-2/dev.tsv",
        ),
        # First digest: the mirrored train.tsv (its header reads `text\tlabel`).
        # Second: the same bytes with GLUE's header `sentence\tlabel`, which is what
        # the zip is believed to hold (inferred, not verified).
        DataFile(
            "train.tsv",
            _SST2_ZIP,
            (
                "c3c410c1cd1307a8dfcbc51f69086c61fc7d95c0fc353b80009dfe5fb4970172",
                "48eac26399f8456935f81dd9e3a745c1430adb6c62e233ccfe22db4a0d15d1d1",
            ),
            member="SST-2/train.tsv",
        ),
    ),
)


def register(dataset: Dataset) -> Dataset:
    """Add (or replace) a dataset in :data:`DATASETS`, so :func:`path` finds it by name."""
    DATASETS[dataset.name] = dataset
    return dataset


def data_dir() -> Path | None:
    """The local data folder named by ``$TRANSFORMER_BOOK_DATA``, or None when the
    variable is unset or empty."""
    value = os.environ.get(DATA_ENV, "")
    return Path(value).expanduser() if value else None


def cache_dir() -> Path:
    """Where downloads go: ``$TRANSFORMER_BOOK_CACHE``, else ``~/.cache/transformer_book``."""
    value = os.environ.get(CACHE_ENV, "")
    return (
        Path(value).expanduser()
        if value
        else Path.home() / ".cache" / "transformer_book"
    )


def sha256_of(file: str | Path) -> str:
    """Hex sha256 digest of a file's bytes."""
    h = hashlib.sha256()
    with open(file, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _verify(file: Path, spec: Dataset, f: DataFile, advice: str) -> None:
    actual = sha256_of(file)
    if actual not in f.sha256:
        raise ChecksumError(
            f"{spec.name}/{f.name} at {file} has the wrong sha256: expected "
            f"{' or '.join(f.sha256)}, got {actual}. {advice}"
        )


def _download(url: str, dest: Path) -> None:
    """Copy ``url`` to ``dest`` (any scheme urllib knows, ``file://`` included).

    Tests replace this.
    """
    with urllib.request.urlopen(url, timeout=60) as response, open(dest, "wb") as out:
        shutil.copyfileobj(response, out)


def _extract(archive: Path, member: str, dest: Path) -> None:
    """Copy one member of a .zip or .tar(.gz) archive to ``dest``. If ``member`` is not
    there verbatim, the only member with the same file name is taken (archives differ in
    their top folder)."""
    base = member.rsplit("/", 1)[-1]
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            names = zf.namelist()
            name = member if member in names else _unique(names, base, archive, member)
            with zf.open(name) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
        return
    with tarfile.open(
        archive
    ) as tf:  # raises tarfile.ReadError for anything that is not a tar archive
        names = [m.name for m in tf.getmembers() if m.isfile()]
        name = member if member in names else _unique(names, base, archive, member)
        src = tf.extractfile(name)
        assert src is not None  # a regular file, checked above
        with src, open(dest, "wb") as out:
            shutil.copyfileobj(src, out)


def _unique(names: list[str], base: str, archive: Path, member: str) -> str:
    hits = [n for n in names if n.rsplit("/", 1)[-1] == base]
    if len(hits) != 1:
        raise DataError(
            f"archive {archive} has no member {member!r} (members named {base!r}: {hits})"
        )
    return hits[0]


def _fetch(spec: Dataset, f: DataFile, root: Path) -> Path:
    """Download ``f`` (or the archive holding it) into the dataset's cache folder
    ``root``, check it, and only then give it its final name ``root / f.name``."""
    dest = root / f.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    archive = root / "_archives" / f.url.rsplit("/", 1)[-1]
    try:
        if f.member is None:
            _download(f.url, part)
        else:
            if not archive.is_file():
                archive.parent.mkdir(parents=True, exist_ok=True)
                archive_part = archive.with_name(archive.name + ".part")
                try:
                    _download(f.url, archive_part)
                    archive_part.replace(archive)
                finally:
                    archive_part.unlink(missing_ok=True)
            try:
                _extract(archive, f.member, part)
            except (tarfile.TarError, zipfile.BadZipFile, KeyError, EOFError) as e:
                raise DataError(
                    f"could not extract {f.member!r} from {archive} ({e}); delete the archive "
                    "to download it again"
                ) from e
    except (
        OSError
    ) as e:  # urllib.error.URLError is an OSError: no network, 404, refused, ...
        part.unlink(missing_ok=True)
        env = os.environ.get(DATA_ENV, "")
        where = f"${DATA_ENV}={env}" if env else f"${DATA_ENV} (unset)"
        raise DataUnavailableError(
            f"cannot get {spec.name}/{f.name}: it is not in {where} nor in the cache "
            f"({dest}), and downloading {f.url} failed ({e}). Connect to the internet, "
            f"or set {DATA_ENV} to a folder that holds "
            f"{spec.name}/{f.name} (layout <folder>/<dataset>/<file>)."
        ) from e
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    try:
        source = (
            f.url
            if f.member is None
            else f"{f.member!r} in {f.url} (archive kept at {archive})"
        )
        _verify(part, spec, f, f"The copy of {source} was deleted, not kept.")
    except ChecksumError:
        part.unlink(missing_ok=True)
        raise
    part.replace(dest)
    return dest


def _lookup(dataset: str | Dataset) -> Dataset:
    if isinstance(dataset, Dataset):
        return dataset
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; known: {sorted(DATASETS)}")
    return DATASETS[dataset]


def path(dataset: str | Dataset, file: str, cache: str | Path | None = None) -> Path:
    """The checked local path of one dataset file: ``$TRANSFORMER_BOOK_DATA``, then the
    cache, then a download.

    ``cache`` overrides :func:`cache_dir`. Raises :class:`ChecksumError` when a digest
    does not match and :class:`DataUnavailableError` when the file is nowhere on disk and
    cannot be downloaded.
    """
    spec = _lookup(dataset)
    f = spec.file(file)
    local = data_dir()
    if local is not None and (local / spec.name / f.name).is_file():
        p = local / spec.name / f.name
        _verify(
            p,
            spec,
            f,
            f"This copy is in ${DATA_ENV}; replace it with the original from {f.url}.",
        )
        return p
    root = (Path(cache).expanduser() if cache is not None else cache_dir()) / spec.name
    p = root / f.name
    if p.is_file():
        _verify(
            p, spec, f, "This copy is in the cache: delete it to download it again."
        )
        return p
    return _fetch(spec, f, root)


def read_text(
    dataset: str | Dataset, file: str, cache: str | Path | None = None
) -> str:
    """A dataset file's text, decoded with the file's registered encoding."""
    spec = _lookup(dataset)
    return path(spec, file, cache).read_text(encoding=spec.file(file).encoding)
