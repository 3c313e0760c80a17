"""The installed package: version and protocol, imports without torch, clear
errors for a missing or wrong-ABI extension and for a daemon of another
protocol, pin_memory as torch does it, and the container /dev/shm limit."""

import os
import pathlib
import re
import shutil
import socket as pysocket
import struct
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import galley
from galley import transforms as T

from conftest import GALLEYD, ROOT

FRAME_MAGIC = 0x594C4C47
WELCOME = 2


def cmake_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(galley VERSION ([0-9.]+)", text).group(1)


def test_one_version_everywhere(daemon):
    version = cmake_version()
    assert galley.__version__ == version
    status = galley.query("status", socket=daemon.socket)
    assert status["version"] == version
    assert status["protocol_version"] == galley.protocol_version
    out = subprocess.run([GALLEYD, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"galleyd {version} (protocol {galley.protocol_version})"
    galleyctl = pathlib.Path(GALLEYD).with_name("galleyctl")
    out = subprocess.run([str(galleyctl), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"galleyctl {version} (protocol {galley.protocol_version})"


@pytest.mark.in_place
def test_installed_package_is_the_one_under_test():
    # The venv run installs galley with pip and must not pick up the source
    # tree's copy; the in-place run uses PYTHONPATH=python on purpose.
    here = pathlib.Path(galley.__file__).resolve().parent
    if os.environ.get("GALLEY_EXPECT_INSTALLED") == "1":
        assert ROOT / "python" not in here.parents and here != ROOT / "python" / "galley"
        assert "site-packages" in here.parts
    else:
        assert here == ROOT / "python" / "galley"


def test_admin_calls_work_without_torch(daemon):
    # `import torch` fails in this child; galley must import and query anyway.
    code = textwrap.dedent(f"""
        import sys
        sys.modules["torch"] = None
        import galley
        status = galley.query("status", socket={daemon.socket!r})
        assert status["version"] == galley.__version__, status
        assert "torch" not in [m for m, v in sys.modules.items() if v is not None]
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def _copy_package(tmp_path, keep_extension_as=None):
    source = pathlib.Path(galley.__file__).resolve().parent
    target = tmp_path / "galley"
    target.mkdir()
    for path in source.glob("*.py"):
        shutil.copy(path, target / path.name)
    if keep_extension_as is not None:
        extension = next(source.glob("_galley*.so"))
        shutil.copy(extension, target / keep_extension_as)
    return tmp_path


def _import_error(path):
    code = "import galley"
    env = dict(os.environ, PYTHONPATH=str(path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=str(path))
    assert out.returncode != 0
    return out.stderr.strip().splitlines()[-1]


def test_missing_extension_says_how_to_build(tmp_path):
    message = _import_error(_copy_package(tmp_path))
    assert "extension is missing" in message
    assert "pip install" in message and sys.executable in message


def test_wrong_abi_extension_names_the_python(tmp_path):
    message = _import_error(_copy_package(tmp_path, "_galley.cpython-38-x86_64-linux-gnu.so"))
    assert "built for another Python" in message
    assert "cpython-38" in message and sys.version.split()[0] in message
    assert "pip install" in message


def _fake_daemon(path, version):
    """Answers one Hello with a Welcome framed in another protocol version."""
    server = pysocket.socket(pysocket.AF_UNIX, pysocket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def serve():
        conn, _ = server.accept()
        with conn:
            header = conn.recv(16, pysocket.MSG_WAITALL)
            length = struct.unpack_from("<I", header, 8)[0]
            conn.recv(length, pysocket.MSG_WAITALL)
            body = b'{"protocol_version": %d}' % version
            conn.sendall(struct.pack("<IHHII", FRAME_MAGIC, version, WELCOME, len(body), 0) + body)
            try:
                conn.recv(1)  # until the client hangs up
            except ConnectionError:
                pass
        server.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_protocol_mismatch_is_refused_with_both_versions(tmp_path):
    path = str(tmp_path / "other.sock")
    thread = _fake_daemon(path, galley.protocol_version + 98)
    with pytest.raises(galley.ProtocolError) as error:
        galley.query("status", socket=path)
    thread.join(timeout=5)
    message = str(error.value)
    assert f"protocol {galley.protocol_version + 98}" in message
    assert f"protocol {galley.protocol_version}" in message
    assert galley.__version__ in message and "same protocol version" in message


@pytest.mark.compat
def test_pin_memory_as_torch_does(daemon, folder):
    transform = T.Compose([T.Resize(32), T.CenterCrop(32)])
    if torch.cuda.is_available():
        loader = galley.DataLoader(folder, batch_size=8, transform=transform, pin_memory=True,
                                   socket=daemon.socket, epochs=1)
        for images, labels in loader:
            assert images.is_pinned() and labels.is_pinned()
        return
    with pytest.warns(UserWarning, match="CUDA is not available"):
        loader = galley.DataLoader(folder, batch_size=8, transform=transform, pin_memory=True,
                                   socket=daemon.socket, epochs=1)
    count = 0
    for images, labels in loader:
        assert not images.is_pinned()
        count += len(labels)
    assert count == 60


def test_container_needs_only_the_socket(daemon, folder):
    # A container's /dev/shm is often 64 MB or less. galley's batch memory is
    # a descriptor passed over the socket, so a job in a mount namespace with
    # a 64 KiB /dev/shm still reads batches far larger than that.
    code = textwrap.dedent(f"""
        import os, galley
        from galley import transforms as T
        shm = os.statvfs("/dev/shm")
        assert shm.f_blocks * shm.f_frsize <= 64 * 1024, shm
        loader = galley.DataLoader({str(folder)!r}, batch_size=30, epochs=1,
                                   transform=T.Compose([T.Resize(96), T.CenterCrop(96)]),
                                   socket={daemon.socket!r})
        total = sum(images.numel() for images, _ in loader)
        assert total == 60 * 3 * 96 * 96, total
        print("ok", total)
    """)
    command = ["unshare", "--map-root-user", "--mount", "sh", "-c",
               'mount -t tmpfs -o size=64k tmpfs /dev/shm && exec "$0" -c "$1"',
               sys.executable, code]
    out = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")
