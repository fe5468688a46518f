/*
 * failfs: a passthrough FUSE filesystem (libfuse3) whose fsyncs fail with EIO while a control file exists: "a disk
 * that fails", for the fsync-failure tests (Tests/SpeakBridgeTestSupport/FailingDisk.swift compiles and mounts it).
 *
 *   FAILFS_ROOT=BACKING FAILFS_CONTROL=FILE failfs MOUNTPOINT -f -o default_permissions
 *
 * Every operation goes to the same path under BACKING (stat reports the backing file's owner and mode, so the
 * daemon's owner/mode checks see the truth), except:
 *   - while FILE exists, each fsync and fdatasync of a file returns EIO;
 *   - while FILE.dir exists, each fsync of a directory (FUSE_FSYNCDIR) returns EIO; of every directory if FILE.dir
 *     is empty, else only of the one whose path in the mount it holds (e.g. "/outbox");
 *   - while FILE.unlink exists, each unlink returns EIO (and removes nothing): of every file if FILE.unlink is empty,
 *     else only of those whose path in the mount ends with what it holds (e.g. ".held-1700000000.journal");
 *   - while FILE.short exists, holding "N M": the next write stores only its first N bytes (all of it if shorter)
 *     and returns that count, and the M writes after it (none if M is left out) fail with EIO; then FILE.short is
 *     removed. A write cut short by a bad block, then the failures that follow it;
 *   - while FILE.space exists, holding N: the disk has N bytes free. The part of a write that lies past the end of
 *     its file takes space (a write is cut short where the space runs out, and fails with ENOSPC when none of that
 *     part fits; FILE.space is counted down); bytes written within the file's size take none, as when they
 *     overwrite blocks already allocated on ext4. A full disk: N = 0. A file that gives bytes back (cut by truncate,
 *     removed by unlink or by a rename over it) adds them to N, as on a real disk;
 * Control files go outside BACKING. Each failed call appends one line to FILE.count: "file PATH", "dir PATH",
 * "unlink PATH", "short PATH" (a write cut short by FILE.short), "write PATH" (a write failed by it) or "space PATH"
 * (a write cut short or failed by FILE.space). Writes, renames and (unless failed) unlinks still reach BACKING, as on
 * a disk whose writeback fails without the writer knowing.
 * Runs in the foreground (-f) until unmounted (fusermount3 -u, or umount as root).
 *
 * Why C and not fuse-python: fuse-python 1.0.5 (Debian 12) crashes in its fsyncdir wrapper, and a filesystem
 * without fsyncdir makes the kernel take every directory fsync as a success (ENOSYS is remembered as "no-op").
 * Needs libfuse3-dev (build) and fuse3 (fusermount3), and /dev/fuse.
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 35
#include <fuse.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <unistd.h>

static const char *root;
static const char *control;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

/* The backing path of `path` (FUSE paths start with '/'); false when too long. */
static int backing(char out[PATH_MAX], const char *path) {
    return snprintf(out, PATH_MAX, "%s%s", root, path) < PATH_MAX;
}

#define BACKING(var, path)                  \
    char var[PATH_MAX];                     \
    if (!backing(var, path)) return -ENAMETOOLONG

/* Appends "KIND PATH" to FILE.count; the caller holds count_lock. */
static void count_failure(const char *kind, const char *path) {
    char name[PATH_MAX];
    snprintf(name, sizeof name, "%s.count", control);
    FILE *f = fopen(name, "a");
    if (f) {
        fprintf(f, "%s %s\n", kind, path);
        fclose(f);
    }
}

/* True (and the failure counted) while the control file `suffix` names exists. */
static int failing(const char *kind, const char *suffix, const char *path) {
    char name[PATH_MAX];
    snprintf(name, sizeof name, "%s%s", control, suffix);
    if (access(name, F_OK) != 0) return 0;
    pthread_mutex_lock(&count_lock);
    count_failure(kind, path);
    pthread_mutex_unlock(&count_lock);
    return 1;
}

/* The contents of the control file FILE<ext> without trailing newlines (and '/' when `trim_slash`), into `out`;
   -1 when it does not exist (the failure is off). */
static long read_control(const char *ext, char *out, size_t size, int trim_slash) {
    char name[PATH_MAX];
    snprintf(name, sizeof name, "%s%s", control, ext);
    FILE *f = fopen(name, "r");
    if (!f) return -1;
    size_t n = fread(out, 1, size - 1, f);
    fclose(f);
    while (n > 0 && (out[n - 1] == '\n' || (trim_slash && out[n - 1] == '/'))) n--;
    out[n] = 0;
    return (long)n;
}

/* Whether a failing directory fsync applies to `path`: FILE.dir empty (every directory) or naming `path`. */
static int directory_selected(const char *path) {
    char only[PATH_MAX];
    long n = read_control(".dir", only, sizeof only, 1);
    return n == 0 || (n > 0 && strcmp(only, path) == 0);
}

/* Whether a failing unlink applies to `path`: FILE.unlink empty (every file) or holding the end of `path`. */
static int unlink_selected(const char *path) {
    char suffix[PATH_MAX];
    long n = read_control(".unlink", suffix, sizeof suffix, 0);
    size_t length = strlen(path);
    return n == 0 || (n > 0 && length >= (size_t)n && strcmp(path + length - (size_t)n, suffix) == 0);
}

static int result(int r) { return r < 0 ? -errno : 0; }

static void *ff_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
    (void)conn;
    /* No caching of attributes or names: every stat reaches the backing file. */
    cfg->entry_timeout = 0;
    cfg->attr_timeout = 0;
    cfg->negative_timeout = 0;
    return NULL;
}

static int ff_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
    if (fi) return result(fstat((int)fi->fh, st));
    BACKING(p, path);
    return result(lstat(p, st));
}

static int ff_access(const char *path, int mask) {
    BACKING(p, path);
    return result(access(p, mask));
}

static int ff_readlink(const char *path, char *buf, size_t size) {
    BACKING(p, path);
    ssize_t n = readlink(p, buf, size - 1);
    if (n < 0) return -errno;
    buf[n] = 0;
    return 0;
}

static int ff_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t offset, struct fuse_file_info *fi,
                      enum fuse_readdir_flags flags) {
    (void)offset; (void)fi; (void)flags;
    BACKING(p, path);
    DIR *dir = opendir(p);
    if (!dir) return -errno;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        struct stat st = {0};
        st.st_ino = entry->d_ino;
        st.st_mode = (mode_t)entry->d_type << 12;
        if (fill(buf, entry->d_name, &st, 0, 0)) break;
    }
    closedir(dir);
    return 0;
}

static int ff_mknod(const char *path, mode_t mode, dev_t dev) {
    BACKING(p, path);
    return result(mknod(p, mode, dev));
}

static int ff_mkdir(const char *path, mode_t mode) {
    BACKING(p, path);
    return result(mkdir(p, mode));
}

/* While FILE.space exists, the bytes a file gives back (cut by truncate, removed by unlink or by a rename over it)
 * are free again, as on a real disk: `st` is the file as it was, `size` what is left of it. */
static void write_control(const char *ext, const char *text);

static void credit_space(const struct stat *st, off_t size) {
    char text[64];
    if (read_control(".space", text, sizeof text, 0) < 0 || st->st_size <= size) return;
    snprintf(text, sizeof text, "%lld", atoll(text) + (long long)(st->st_size - size));
    write_control(".space", text);
}

static int ff_unlink(const char *path) {
    if (unlink_selected(path) && failing("unlink", ".unlink", path)) return -EIO;
    BACKING(p, path);
    struct stat st;
    int had = lstat(p, &st) == 0 && S_ISREG(st.st_mode);
    int r = unlink(p);
    if (r == 0 && had && st.st_nlink == 1) credit_space(&st, 0);
    return result(r);
}

static int ff_rmdir(const char *path) {
    BACKING(p, path);
    return result(rmdir(p));
}

static int ff_symlink(const char *target, const char *path) {
    BACKING(p, path);
    return result(symlink(target, p));
}

static int ff_rename(const char *from, const char *to, unsigned int flags) {
    BACKING(a, from);
    BACKING(b, to);
    struct stat st;
    int replaced = lstat(b, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1;
    int r = renameat2(AT_FDCWD, a, AT_FDCWD, b, flags);
    if (r == 0 && replaced) credit_space(&st, 0);
    return result(r);
}

static int ff_link(const char *from, const char *to) {
    BACKING(a, from);
    BACKING(b, to);
    return result(link(a, b));
}

static int ff_chmod(const char *path, mode_t mode, struct fuse_file_info *fi) {
    if (fi) return result(fchmod((int)fi->fh, mode));
    BACKING(p, path);
    return result(chmod(p, mode));
}

static int ff_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi) {
    if (fi) return result(fchown((int)fi->fh, uid, gid));
    BACKING(p, path);
    return result(lchown(p, uid, gid));
}

static int ff_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
    struct stat st;
    if (fi) {
        int had = fstat((int)fi->fh, &st) == 0;
        int r = ftruncate((int)fi->fh, size);
        if (r == 0 && had) credit_space(&st, size);
        return result(r);
    }
    BACKING(p, path);
    int had = stat(p, &st) == 0;
    int r = truncate(p, size);
    if (r == 0 && had) credit_space(&st, size);
    return result(r);
}

static int ff_utimens(const char *path, const struct timespec ts[2], struct fuse_file_info *fi) {
    if (fi) return result(futimens((int)fi->fh, ts));
    BACKING(p, path);
    return result(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW));
}

static int ff_create(const char *path, mode_t mode, struct fuse_file_info *fi) {
    BACKING(p, path);
    int fd = open(p, fi->flags, mode);
    if (fd < 0) return -errno;
    fi->fh = (uint64_t)fd;
    return 0;
}

static int ff_open(const char *path, struct fuse_file_info *fi) {
    BACKING(p, path);
    int fd = open(p, fi->flags);
    if (fd < 0) return -errno;
    fi->fh = (uint64_t)fd;
    return 0;
}

static int ff_read(const char *path, char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
    (void)path;
    ssize_t n = pread((int)fi->fh, buf, size, offset);
    return n < 0 ? -errno : (int)n;
}

/* Writes `text` over the control file FILE<ext>. */
static void write_control(const char *ext, const char *text) {
    char name[PATH_MAX];
    snprintf(name, sizeof name, "%s%s", control, ext);
    FILE *f = fopen(name, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* How many bytes of a write of `size` at `offset` to `fd` FILE.short and FILE.space let through (0: it fails with
   *failure), counting them down; the caller holds count_lock. */
static size_t allowed_bytes(const char *path, int fd, size_t size, off_t offset, int *failure) {
    char text[64];
    if (read_control(".short", text, sizeof text, 0) >= 0) {
        long long cut = -1, after = 0;
        char name[PATH_MAX];
        sscanf(text, "%lld %lld", &cut, &after);
        if (cut >= 0) {
            snprintf(text, sizeof text, "-1 %lld", after);
            if (after > 0) write_control(".short", text);
            else if (snprintf(name, sizeof name, "%s.short", control) < PATH_MAX) unlink(name);
            if ((size_t)cut >= size) return size;
            count_failure("short", path);
            if (cut > 0) return (size_t)cut;
            *failure = EIO;
            return 0;
        }
        snprintf(text, sizeof text, "-1 %lld", after - 1);
        if (after > 1) write_control(".short", text);
        else if (snprintf(name, sizeof name, "%s.short", control) < PATH_MAX) unlink(name);
        count_failure("write", path);
        *failure = EIO;
        return 0;
    }
    if (read_control(".space", text, sizeof text, 0) >= 0) {
        long long free_bytes = atoll(text);
        struct stat st;
        if (fstat(fd, &st) != 0) return size;
        /* The bytes before the file's end take no space; the rest does. */
        size_t within = offset >= st.st_size ? 0 : (size_t)(st.st_size - offset) < size ? (size_t)(st.st_size - offset) : size;
        size_t allowed = size;
        if ((long long)(size - within) > free_bytes) {
            allowed = within + (size_t)(free_bytes > 0 ? free_bytes : 0);
            count_failure("space", path);
            if (allowed == 0) {
                *failure = ENOSPC;
                return 0;
            }
        }
        snprintf(text, sizeof text, "%lld", free_bytes - (long long)(allowed - within));
        write_control(".space", text);
        return allowed;
    }
    return size;
}

static int ff_write(const char *path, const char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
    int failure = 0;
    pthread_mutex_lock(&count_lock);
    size_t allowed = allowed_bytes(path, (int)fi->fh, size, offset, &failure);
    ssize_t n = allowed == 0 && size > 0 ? -1 : pwrite((int)fi->fh, buf, allowed, offset);
    int code = n < 0 && failure == 0 ? errno : failure;
    pthread_mutex_unlock(&count_lock);
    return n < 0 ? -code : (int)n;
}

static int ff_statfs(const char *path, struct statvfs *st) {
    (void)path;
    return result(statvfs(root, st));
}

static int ff_flush(const char *path, struct fuse_file_info *fi) {
    (void)path; (void)fi;
    return 0;
}

static int ff_release(const char *path, struct fuse_file_info *fi) {
    (void)path;
    close((int)fi->fh);
    return 0;
}

static int ff_fsync(const char *path, int datasync, struct fuse_file_info *fi) {
    if (failing("file", "", path)) return -EIO;
    return result(datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh));
}

static int ff_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi) {
    (void)fi;
    if (directory_selected(path) && failing("dir", ".dir", path)) return -EIO;
    BACKING(p, path);
    int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    int r = datasync ? fdatasync(fd) : fsync(fd);
    int code = errno;
    close(fd);
    return r < 0 ? -code : 0;
}

static const struct fuse_operations operations = {
    .init = ff_init,
    .getattr = ff_getattr,
    .access = ff_access,
    .readlink = ff_readlink,
    .readdir = ff_readdir,
    .mknod = ff_mknod,
    .mkdir = ff_mkdir,
    .unlink = ff_unlink,
    .rmdir = ff_rmdir,
    .symlink = ff_symlink,
    .rename = ff_rename,
    .link = ff_link,
    .chmod = ff_chmod,
    .chown = ff_chown,
    .truncate = ff_truncate,
    .utimens = ff_utimens,
    .create = ff_create,
    .open = ff_open,
    .read = ff_read,
    .write = ff_write,
    .statfs = ff_statfs,
    .flush = ff_flush,
    .release = ff_release,
    .fsync = ff_fsync,
    .fsyncdir = ff_fsyncdir,
};

int main(int argc, char *argv[]) {
    root = getenv("FAILFS_ROOT");
    control = getenv("FAILFS_CONTROL");
    if (!root || !*root || !control || !*control) {
        fprintf(stderr, "failfs: set FAILFS_ROOT (the backing directory) and FAILFS_CONTROL (the control file)\n");
        return 2;
    }
    umask(0);  /* the modes callers ask for reach the backing files as asked (their umask is applied by the kernel) */
    return fuse_main(argc, argv, &operations, NULL);
}
