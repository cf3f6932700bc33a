"""Writes the index `readers.webdataset` reads for a WebDataset archive, in DALI's format
(`v1.2 <samples>`, then per sample `ext offset size filename` for each component), as DALI's
`wds2idx.py` does; the samples are grouped exactly as the reader groups them.

    python -m sluice.tools.wds2idx ARCHIVE.tar [INDEX]

Without INDEX, the index goes beside the archive: its path up to the first dot of the file
name, plus `.idx`."""

import argparse
import os
import sys

from .. import _core

VERSION = "v1.2"


def default_index_path(archive):
    start = archive.rfind("/") + 1
    dot = archive.find(".", start + 1)
    return (archive if dot < 0 else archive[:dot]) + ".idx"


def main(argv=None):
    ap = argparse.ArgumentParser(description="Creates a webdataset index file for the use with fn.readers.webdataset.")
    ap.add_argument("archive", help="path to the .tar file")
    ap.add_argument("index", nargs="?", help="path to the index file")
    a = ap.parse_args(argv)
    archive = os.path.abspath(a.archive)
    index = os.path.abspath(a.index or default_index_path(a.archive))
    try:
        samples = _core.webdataset_samples(archive)
    except (OSError, ValueError) as e:
        print(e, file=sys.stderr)
        return 1
    if not samples:
        print(f"{archive}: Webdataset Tar File empty", file=sys.stderr)
        return 1
    with open(index, "w") as f:
        f.write(f"{VERSION} {len(samples)}\n")
        for sample in samples:
            f.write(" ".join(f"{ext} {offset} {size} {name}" for ext, offset, size, name in sample) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
