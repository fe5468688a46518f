#if canImport(Glibc)
import Glibc
#endif

/// The one rule for everything SpeakBridge keeps on disk: it belongs to the user running SpeakBridge and no other
/// user can change it. Another local user who could write one of our directories could plant a symlink where we
/// write a key, a `peers.json` that pairs their own device, or a control socket that answers `pair` with their code.
///
/// - A directory we use (config, state, runtime, outbox, the `--home` root) must be owned by us and not writable by
///   group or others. Missing ones are created 0700.
/// - Every directory above one of those (`/`, `/home`, `~/.config`, a `--home`'s parents) must be owned by root or
///   by us, and not writable by group or others unless it is sticky (`/tmp`) — group-writable is fine when the
///   group is its owner's user-private group (`isUserPrivateGroup`): whoever can write a parent can rename
///   our directory away and put one of theirs in its place between two of our starts (a revoked device paired
///   again by a rolled-back `peers.json`). `checkAncestors`, as OpenSSH's StrictModes walks a key's path.
/// - The directory itself is examined with lstat(2). A symlink is accepted only if the link itself is ours (only
///   we could have made it) and it leads to a directory that passes the same check; a symlink owned by anyone
///   else is refused, whatever it points to. (A user's own link, e.g. `~/.config/speakbridge` into a dotfiles
///   repository, keeps working.)
/// - A file is checked with fstat(2) on the descriptor we opened with O_NOFOLLOW, so what is checked is what is
///   read: a regular file, owned by us, with no permission for group or others (every file we keep is 0600).
public enum PrivatePath {
    /// Creates `path` (and missing parents, 0700) and checks it.
    ///
    /// A path that already names a directory (or a symlink: `checkDirectory` decides about it) is only checked:
    /// creating it would change nothing (every mkdir of its prefixes fails with EEXIST), and `Home.prepare`, which
    /// runs three times as `send` starts, made about 25 such mkdir calls each time (and the first one's prefix
    /// joining cost 0.24 M instructions of conformance look-up). Anything else (absent, not a directory, lstat
    /// failing) takes the full path: create, then check, as always.
    /// The directories above `path` are judged first (`checkAncestors`); `checkedAncestors` carries the ones already
    /// judged across the directories of one home.
    public static func prepareDirectory(_ path: String) throws(StoreError) {
        var checked: [String] = []
        try prepareDirectory(path, checkedAncestors: &checked)
    }

    public static func prepareDirectory(_ path: String, checkedAncestors: inout [String]) throws(StoreError) {
        try checkAncestors(of: path, checked: &checkedAncestors)
        var info = stat()
        if lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR || info.st_mode & S_IFMT == S_IFLNK {
            try checkDirectory(path, lstatInfo: info)  // that lstat is the check's: not made twice
            // The directory is a link: the directories above where it leads are judged too (above, only the
            // link's own parents were; a team-writable directory above the target let a teammate move ours away).
            if info.st_mode & S_IFMT == S_IFLNK {
                guard let resolved = realpath(path, nil) else { throw .io("follow the symlink", path, errno: errno) }
                let target = String(decoding: UnsafeRawBufferPointer(start: resolved, count: strlen(resolved)),
                                    as: UTF8.self)
                free(resolved)
                try checkAncestors(of: target, checked: &checkedAncestors)
            }
            return
        }
        try FileIO.makeDirectory(path)
        try checkDirectory(path)
    }

    /// Checks every directory above `path` (see the rule above), from `/` down; stops at the first one that does not
    /// exist (the rest will be ours, made 0700). A symlink on the way must be root's or ours, and the directories
    /// above its target must pass too. `checked` holds the directories already judged, so that the directories of
    /// one home are walked once. Only absolute paths are walked (Home's are: it resolves every relative one).
    ///
    /// This runs at every start (`Home.prepare`, three times as `send` starts), so paths are cut as UTF-8 bytes: a
    /// first version with Character-level String operations (`lastIndex(of:)`, `hasSuffix`) and a `Set<String>`
    /// made a one-shot `send` 0.5 ms slower (`startup_ab.py`, 20 pairs, lower in 2 of 20); this one is within noise
    /// of the same binary without the walk (one-shot 5.73 / 5.71 ms, page faults 549 / 549.5).
    public static func checkAncestors(of path: String, checked: inout [String]) throws(StoreError) {
        let bytes = Array(path.utf8)
        guard bytes.first == slash else { return }
        var end = bytes.count
        while end > 1 && bytes[end - 1] == slash { end -= 1 }
        var cut = end - 1
        while cut > 0 && bytes[cut] != slash { cut -= 1 }
        try checkChain(Array(bytes[0..<max(cut, 1)]), checked: &checked, depth: 0)
    }

    private static let slash = UInt8(ascii: "/")

    /// `directory` as UTF-8 bytes, absolute.
    private static func checkChain(_ directory: [UInt8], checked: inout [String], depth: Int) throws(StoreError) {
        var prefixes = ["/"]
        var i = 1
        while i <= directory.count {
            if (i == directory.count || directory[i] == slash) && directory[i - 1] != slash {
                prefixes.append(String(decoding: directory[0..<i], as: UTF8.self))
            }
            i += 1
        }
        let me = geteuid()
        for dir in prefixes where !checked.contains(dir) {
            checked.append(dir)
            var info = stat()
            guard lstat(dir, &info) == 0 else {
                // Missing: what lies below it is made by us, 0700. It is judged again if a later directory of the
                // same home passes here (someone else may have made it meanwhile).
                let failure = errno
                checked.removeLast()
                if failure == ENOENT { return }
                throw .io("inspect", dir, errno: failure)
            }
            if info.st_mode & S_IFMT == S_IFLNK {
                guard info.st_uid == 0 || info.st_uid == me else { throw ownedByOther(dir, uid: info.st_uid, what: "is a symlink above SpeakBridge's files") }
                guard depth < 16 else { throw StoreError("\(dir): too many symbolic links above SpeakBridge's files") }
                guard let resolved = realpath(dir, nil) else { throw .io("follow the symlink", dir, errno: errno) }
                let target = Array(UnsafeRawBufferPointer(start: resolved, count: strlen(resolved)))
                free(resolved)
                try checkChain(target, checked: &checked, depth: depth + 1)
                continue
            }
            guard info.st_mode & S_IFMT == S_IFDIR else { return }  // not a directory: creating below it fails clearly
            guard info.st_uid == 0 || info.st_uid == me else {
                throw StoreError("\(dir) belongs to another user (uid \(info.st_uid)), who could replace SpeakBridge's directories in it",
                                 hint: "keep SpeakBridge's files under a directory only you (or root) can change, e.g. leave out --home")
            }
            let mode = info.st_mode & 0o7777
            let othersMayWrite = mode & 0o002 != 0 || (mode & 0o020 != 0 && !isUserPrivateGroup(info.st_gid, of: info.st_uid))
            if othersMayWrite && mode & S_ISVTX == 0 {
                throw StoreError("\(dir) is writable by other users (mode \(octal(mode))), who could move SpeakBridge's directories away and plant their own",
                                 hint: "run `chmod go-w \(dir)` if it is yours, or keep SpeakBridge's files elsewhere (leave out --home)")
            }
        }
    }

    /// Whether group `gid` is `owner`'s user-private group (Fedora and RHEL give every user one, with umask 002, so
    /// that a shell's directories are 0775): the owner's primary group, named as the owner, listing no other member.
    /// (Debian's OpenSSH also asks that no other account has it as its primary group; that means enumerating every
    /// account through NSS — a whole LDAP directory, say — at every start of a user whose `~/.config` is 0775, so
    /// that case, an administrator's mistake, is not looked for.) Asked only for a group-writable directory above
    /// SpeakBridge's own; the reentrant calls, as sink threads may look up the password database meanwhile.
    static func isUserPrivateGroup(_ gid: gid_t, of owner: uid_t) -> Bool {
        var accountBuffer = [CChar](repeating: 0, count: 16_384)
        var account = passwd()
        var match: UnsafeMutablePointer<passwd>?
        guard getpwuid_r(owner, &account, &accountBuffer, accountBuffer.count, &match) == 0, let user = match,
              user.pointee.pw_gid == gid, let userName = user.pointee.pw_name else { return false }
        var groupBuffer = [CChar](repeating: 0, count: 16_384)
        var entry = group()
        var found: UnsafeMutablePointer<group>?
        guard getgrgid_r(gid, &entry, &groupBuffer, groupBuffer.count, &found) == 0, let group = found,
              let groupName = group.pointee.gr_name, strcmp(groupName, userName) == 0 else { return false }
        if var list = group.pointee.gr_mem {
            while let member = list.pointee {
                guard strcmp(member, userName) == 0 else { return false }
                list += 1
            }
        }
        return true
    }

    /// Checks an existing directory; throws a clear error (with the command that fixes it) if another user could
    /// write to it. ENOENT is reported as an I/O error (callers that expect absence check first).
    public static func checkDirectory(_ path: String) throws(StoreError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw .io("inspect", path, errno: errno) }
        try checkDirectory(path, lstatInfo: info)
    }

    /// `checkDirectory` with the lstat(2) of `path` already made.
    static func checkDirectory(_ path: String, lstatInfo: stat) throws(StoreError) {
        var info = lstatInfo
        if info.st_mode & S_IFMT == S_IFLNK {
            guard info.st_uid == geteuid() else { throw ownedByOther(path, uid: info.st_uid, what: "is a symlink") }
            guard stat(path, &info) == 0 else { throw .io("follow the symlink", path, errno: errno) }
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw StoreError("\(path) is not a directory", hint: "move it away; speakbridge creates the directory itself")
        }
        guard info.st_uid == geteuid() else { throw ownedByOther(path, uid: info.st_uid, what: "is a directory") }
        let mode = info.st_mode & 0o7777
        guard mode & 0o022 == 0 else {
            if mode & S_ISVTX != 0 {  // a shared directory such as /tmp itself: chmod is not the answer
                throw StoreError("\(path) is writable by other users (mode \(octal(mode)))",
                                 hint: "it is a shared directory: leave out --home (the default is private), or give a "
                                     + "directory under your home, which speakbridge creates 0700")
            }
            throw StoreError("\(path) is writable by other users (mode \(octal(mode)))",
                             hint: "run `chmod 700 \(path)`, and check that nothing in it was planted by someone else")
        }
    }

    /// Checks an opened descriptor of one of our files: a regular file, ours, no permission for group or others.
    /// - Parameter leaked: what a user should do if others could already read it (keys to replace, pairings to redo).
    public static func checkFile(_ fd: Int32, path: String, leaked: String? = nil) throws(StoreError) {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .io("inspect", path, errno: errno) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw StoreError("\(path) is not a regular file", hint: "move it away; speakbridge recreates it")
        }
        guard info.st_uid == geteuid() else { throw ownedByOther(path, uid: info.st_uid, what: "is a file") }
        let mode = info.st_mode & 0o7777
        guard mode & 0o077 == 0 else {
            let access = mode & 0o022 != 0 ? "writable" : "readable"
            var hint = "run `chmod 600 \(path)`"
            if mode & 0o022 != 0 {
                // A descriptor opened while the file was open to others survives the chmod: only a new inode is safe.
                hint = "check what is in it (another user could have changed it), then make it a new file of yours "
                    + "(`install -m 600 \(path) \(path).new && mv \(path).new \(path)`): a chmod would not close a "
                    + "descriptor another user may already hold open"
            }
            if let leaked { hint += "; if other users could read it, \(leaked)" }
            throw StoreError("\(path) is \(access) by other users (mode \(octal(mode)))", hint: hint)
        }
    }

    /// Checks a path opened with O_NOFOLLOW that failed with ELOOP: a symlink where a file of ours must be.
    static func symlinkRefused(_ path: String) -> StoreError {
        StoreError("\(path) is a symbolic link; speakbridge does not follow links for its own files",
                   hint: "remove the link (`rm \(path)`); if you did not create it, someone may have tried to redirect your keys")
    }

    public static func ownedByOther(_ path: String, uid: uid_t, what: String) -> StoreError {
        StoreError("\(path) \(what) owned by another user (uid \(uid)), not by you (uid \(geteuid()))",
                   hint: "do not use it: it may have been planted to intercept SpeakBridge; remove it "
                       + "(`sudo rm -r \(path)`) or choose another --home; if it really is yours, "
                       + "`sudo chown \(geteuid()) \(path)`")
    }

    static func octal(_ mode: mode_t) -> String { String(mode, radix: 8) }
}
