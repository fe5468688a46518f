#!/usr/bin/python3
"""A passthrough FUSE filesystem whose fsync(2) and fdatasync(2) of files fail with EIO while a control file exists: "a disk that fails", for the fsync-failure tests (Tests/EndToEndTests/FsyncFailureTests.swift).

  FAILFS_ROOT=BACKING FAILFS_CONTROL=FILE failfs.py MOUNTPOINT -f -o default_permissions[,allow_other]

Every other operation goes to the same path under BACKING (os.* calls; stat reports the backing file's owner and
mode, so the daemon's owner/mode checks see the truth). While FILE exists (put it outside BACKING), each fsync
and fdatasync of a file returns EIO and is counted in FILE + ".count" (one line per failed call: "file PATH"); writes still reach BACKING, as on a disk whose writeback fails without the writer knowing.
Runs in the foreground (-f) until unmounted (fusermount3 -u, or umount as root).

Needs the Debian package python3-fuse (fuse-python, API 0.2) and /dev/fuse; fuse3 for fusermount3.
"""
import errno
import os
import sys
import threading

import fuse
from fuse import Fuse

fuse.fuse_python_api = (0, 2)

ROOT = os.environ["FAILFS_ROOT"].rstrip("/")
CONTROL = os.environ["FAILFS_CONTROL"]
_count_lock = threading.Lock()


def backing(path):
    return ROOT + path


def failing(kind, path):
    """True (and the failure counted) while the control file exists."""
    if not os.path.exists(CONTROL):
        return False
    with _count_lock:
        with open(CONTROL + ".count", "a") as f:
            f.write(f"{kind} {path}\n")
    return True


class FailFile:
    """One open file: a descriptor on the backing file."""

    def __init__(self, path, flags, *mode):
        self.path = path
        # O_EXCL/O_CREAT/O_NOFOLLOW as the caller asked (create passes a mode).
        self.fd = os.open(backing(path), flags, *mode)

    def read(self, length, offset):
        return os.pread(self.fd, length, offset)

    def write(self, buf, offset):
        return os.pwrite(self.fd, buf, offset)

    def fgetattr(self):
        return os.fstat(self.fd)

    def ftruncate(self, length):
        os.ftruncate(self.fd, length)

    def flush(self):
        return 0

    def fsync(self, datasync):
        if failing("file", self.path):
            return -errno.EIO
        (os.fdatasync if datasync else os.fsync)(self.fd)
        return 0

    def release(self, flags):
        os.close(self.fd)
        return 0


class FailFS(Fuse):
    """No fsyncdir: fuse-python 1.0.5 (Debian 12) crashes in its fsyncdir wrapper, with or without a dir_class.
    The kernel then takes ENOSYS for a directory fsync as success, so directory fsyncs never fail here."""

    def readdir(self, path, offset):
        for name in [".", ".."] + os.listdir(backing(path)):
            yield fuse.Direntry(name)

    def getattr(self, path):
        return os.lstat(backing(path))

    def readlink(self, path):
        return os.readlink(backing(path))

    def mknod(self, path, mode, dev):
        os.mknod(backing(path), mode, dev)

    def mkdir(self, path, mode):
        os.mkdir(backing(path), mode)

    def unlink(self, path):
        os.unlink(backing(path))

    def rmdir(self, path):
        os.rmdir(backing(path))

    def symlink(self, target, path):
        os.symlink(target, backing(path))

    def link(self, target, path):
        os.link(backing(target), backing(path))

    def rename(self, old, new):
        os.rename(backing(old), backing(new))

    def chmod(self, path, mode):
        os.chmod(backing(path), mode, follow_symlinks=False)

    def chown(self, path, uid, gid):
        os.chown(backing(path), uid, gid, follow_symlinks=False)

    def truncate(self, path, length):
        os.truncate(backing(path), length)

    def utimens(self, path, ts_acc, ts_mod):
        os.utime(backing(path), ns=(ts_acc.tv_sec * 10**9 + ts_acc.tv_nsec, ts_mod.tv_sec * 10**9 + ts_mod.tv_nsec),
                 follow_symlinks=False)

    def access(self, path, mode):
        if not os.access(backing(path), mode):
            return -errno.EACCES
        return 0

    def statfs(self):
        return os.statvfs(ROOT)


def main():
    server = FailFS(version="failfs 1", usage=__doc__, dash_s_do="setsingle")
    server.file_class = FailFile
    server.parse(errex=1)
    server.main()


if __name__ == "__main__":
    sys.exit(main())
