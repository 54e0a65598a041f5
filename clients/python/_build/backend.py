"""The PEP 517 build backend of urlflow_delegate, standard library only: a wheel of the one
module, an sdist of this directory's files, and an editable install (PEP 660) by a .pth
file. The version is the module's __version__."""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

NAME = "urlflow_delegate"
DIST = "urlflow-delegate"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE = os.path.join(HERE, NAME + ".py")
SDIST_FILES = ["pyproject.toml", "README.md", NAME + ".py", "_build/backend.py"]


def _version():
    with open(MODULE, encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M)
    if not m:
        raise RuntimeError(f"{MODULE}: no __version__")
    return m.group(1)


def _metadata():
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {DIST}\n"
        f"Version: {_version()}\n"
        "Summary: urlflow's delegation client for MCP servers in Python: API client, events, webhooks, MCP adapter\n"
        "License: Apache-2.0\n"
        "Requires-Python: >=3.10\n"
        "Description-Content-Type: text/markdown\n"
        "\n" + readme
    )


def _wheel(wheel_directory, files):
    """Writes a wheel of files (archive name → bytes) and returns its file name."""
    version = _version()
    dist_info = f"{NAME}-{version}.dist-info"
    files = dict(files)
    files[f"{dist_info}/METADATA"] = _metadata().encode()
    files[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: urlflow_delegate backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{dist_info}/top_level.txt"] = (NAME + "\n").encode()
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel_name = f"{NAME}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, files[name], zipfile.ZIP_DEFLATED)
    return wheel_name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with open(MODULE, "rb") as f:
        return _wheel(wheel_directory, {NAME + ".py": f.read()})


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {NAME + ".pth": (HERE + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{_version()}"
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        pkg_info = _metadata().encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size, info.mtime = len(pkg_info), 0
        tar.addfile(info, io.BytesIO(pkg_info))
        for rel in SDIST_FILES:
            tar.add(os.path.join(HERE, rel), arcname=f"{base}/{rel}")
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []
