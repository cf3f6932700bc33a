"""Writes the index `readers.tfrecord` needs for a TFRecord file: one `offset size` line per
record, as DALI's `tfrecord2idx` does.

    python -m sluice.tools.tfrecord2idx FILE.tfrecord FILE.idx

Each record's framing is checked (its length's CRC, and that the record fits in the file):
an index of a damaged file is refused with the offset of the damage, not written half."""

import struct
import sys

from .. import _core


def records(path):
    """(offset, size) of every record of the TFRecord file `path`."""
    out = []
    with open(path, "rb") as f:
        data_end = f.seek(0, 2)
        f.seek(0)
        while True:
            offset = f.tell()
            head = f.read(12)
            if not head:
                return out
            if len(head) < 12:
                raise ValueError(f"{path}: truncated record header at byte {offset}")
            (length,) = struct.unpack("<Q", head[:8])
            if _core.masked_crc32c(head[:8]) != struct.unpack("<I", head[8:])[0]:
                raise ValueError(f"{path}: not a TFRecord file, or damaged at byte {offset} (length CRC mismatch)")
            size = 16 + length
            if offset + size > data_end:
                raise ValueError(f"{path}: the record at byte {offset} ({size} bytes) runs past the end of the file")
            out.append((offset, size))
            f.seek(offset + size)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m sluice.tools.tfrecord2idx FILE.tfrecord FILE.idx", file=sys.stderr)
        return 2
    try:
        index = records(argv[0])
    except (OSError, ValueError) as e:
        print(e, file=sys.stderr)
        return 1
    with open(argv[1], "w") as f:
        f.writelines(f"{offset} {size}\n" for offset, size in index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
