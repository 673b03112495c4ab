#!/usr/bin/env python3
"""Write hostbench's Python wheel around an already-built binary (scripts/package).

The wheel is what maturin's `bindings = "bin"` makes: the binary as a script in the wheel's
`.data/scripts`, so `pip install` (or `pipx`, `uv tool install`, `pip install --user` on a login
node without root) puts `hostbench` on PATH. Written here rather than by maturin because maturin
would compile the whole workspace a second time for the binary scripts/package has already built.
The man pages go to `<prefix>/share/man/man1`, where `man` finds them for a venv or ~/.local.

Usage: build_wheel.py BINARY VERSION PLATFORM_TAG MAN_DIR README OUT_DIR
"""

import base64
import hashlib
import os
import sys
import time
import zipfile

NAME = "hostbench"
SUMMARY = "Measure CPU, memory, disk, network and GPU against their theoretical limits"
# Fixed entry times, so the same binary gives the same wheel (SOURCE_DATE_EPOCH where set).
EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))


def record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def main():
    binary, version, platform, man_dir, readme, out_dir = sys.argv[1:7]
    data_dir = f"{NAME}-{version}.data"
    info_dir = f"{NAME}-{version}.dist-info"
    with open(readme, encoding="utf-8") as f:
        description = f.read()
    metadata = (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {version}\n"
        f"Summary: {SUMMARY}\n"
        "License: MIT OR Apache-2.0\n"
        "Classifier: Operating System :: POSIX :: Linux\n"
        "Classifier: Topic :: System :: Benchmark\n"
        "Description-Content-Type: text/markdown\n"
        "\n" + description
    )
    wheel = (
        "Wheel-Version: 1.0\n"
        "Generator: hostbench scripts/package\n"
        "Root-Is-Purelib: false\n"
        f"Tag: py3-none-{platform}\n"
    )

    # (path in the wheel, bytes, executable)
    entries = []
    with open(binary, "rb") as f:
        entries.append((f"{data_dir}/scripts/{NAME}", f.read(), True))
    for page in sorted(os.listdir(man_dir)):
        with open(os.path.join(man_dir, page), "rb") as f:
            entries.append((f"{data_dir}/data/share/man/man1/{page}", f.read(), False))
    entries.append((f"{info_dir}/METADATA", metadata.encode(), False))
    entries.append((f"{info_dir}/WHEEL", wheel.encode(), False))
    record = [record_line(p, d) for p, d, _ in entries] + [f"{info_dir}/RECORD,,"]
    entries.append((f"{info_dir}/RECORD", ("\n".join(record) + "\n").encode(), False))

    path = os.path.join(out_dir, f"{NAME}-{version}-py3-none-{platform}.whl")
    stamp = max(EPOCH, 315532800)  # zip cannot hold times before 1980
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, executable in entries:
            info = zipfile.ZipInfo(name, date_time=time.gmtime(stamp)[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            # pip keeps the executable bit of a script it installs from the entry's Unix mode.
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            z.writestr(info, data)
    print(path)


if __name__ == "__main__":
    main()
