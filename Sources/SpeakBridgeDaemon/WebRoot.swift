#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeStore
import SpeakBridgeSupport

/// The page's files are checked before the browser front serves them (WebFront, flow step 2). The page runs in the
/// browser device's origin, where its static key, psk and outbox live: another local user who could change one
/// file there (`app.js`) would own that device, and one who could plant a FIFO would block the lws thread (lws
/// opens served files by path and follows symlinks). So, at every start of the front:
///
/// 1. Every directory above the root, and the root itself, passes the rule for directories above SpeakBridge's own
///    (`PrivatePath.checkAncestors`: root's or ours, not writable by group or others unless sticky or the owner's
///    user-private group; a symlink on the way must be root's or ours, its target checked the same way).
/// 2. The root and every directory in it: a real directory (no symlink), root's or ours, and never sticky-and-
///    writable by others (in `/tmp` itself anyone could add a page the origin would serve). Rule 1's group rule
///    applies to each.
/// 3. Every other entry in the tree: a regular file (no symlink, FIFO, socket or device), root's or ours, not
///    writable by group or others.
/// 4. At most `maxEntries` entries, `maxDepth` levels: the page is a dozen files, and a root given by mistake
///    (`--web-root ~`) is refused rather than walked (and served).
///
/// What passes can then change only by root or us: nothing another user writes is served later either. The front
/// serves the root as resolved here (realpath), so lws follows no link this check did not see.
enum WebRoot {
    static let maxEntries = 256
    static let maxDepth = 6

    /// The root, absolute and resolved, or why it must not be served.
    static func check(_ root: String) throws(StoreError) -> String {
        let absolute = root.hasPrefix("/") ? root : currentDirectory() + "/" + root
        var checked: [String] = []
        try ancestors(of: absolute + "/index.html", checked: &checked)
        guard let pointer = realpath(absolute, nil) else { throw .io("resolve", absolute, errno: errno) }
        let resolved = String(cString: pointer)
        free(pointer)
        var entries = 0
        try walk(resolved, depth: 0, entries: &entries, checked: &checked)
        return resolved
    }

    private static func walk(_ directory: String, depth: Int, entries: inout Int,
                             checked: inout [String]) throws(StoreError) {
        try checkDirectory(directory, checked: &checked)
        guard let dir = opendir(directory) else { throw .io("list", directory, errno: errno) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = directoryEntryName(entry) { String(decoding: $0, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        for name in names {
            entries += 1
            guard entries <= maxEntries else {
                throw StoreError("the page's directory \(directory) holds more than \(maxEntries) entries; it is not the page's files",
                                 hint: "give `speakbridge serve --web-root` the page's own directory (Web/ in the source tree)")
            }
            let path = directory + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0 else { throw .io("inspect", path, errno: errno) }
            if info.st_mode & S_IFMT == S_IFDIR {
                guard depth < maxDepth else {
                    throw StoreError("\(path) is nested more than \(maxDepth) levels below the page's root",
                                     hint: "give `speakbridge serve --web-root` the page's own directory (Web/ in the source tree)")
                }
                try walk(path, depth: depth + 1, entries: &entries, checked: &checked)
            } else {
                try checkFile(path, info)
            }
        }
    }

    /// Rule 2, for one directory of the tree (its ancestors were judged already: `checked`).
    private static func checkDirectory(_ path: String, checked: inout [String]) throws(StoreError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw .io("inspect", path, errno: errno) }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw StoreError("\(path) is not a directory", hint: "give `speakbridge serve --web-root` a directory")
        }
        // The ancestor rule, for this directory itself (the walk cuts at the last "/").
        try ancestors(of: path + "/.", checked: &checked)
        let mode = info.st_mode & 0o7777
        if mode & S_ISVTX != 0 && mode & 0o022 != 0 {
            throw StoreError("\(path) is a shared directory (mode \(String(mode, radix: 8))): other users could add files the page's origin would serve",
                             hint: "keep the page's files in a directory only you (or root) can write, e.g. `install -d -m 755 DIR` and copy Web/ there")
        }
    }

    /// Rule 1 for the directories above `path`, with a hint about the page rather than SpeakBridge's own files.
    private static func ancestors(of path: String, checked: inout [String]) throws(StoreError) {
        do throws(StoreError) {
            try PrivatePath.checkAncestors(of: path, checked: &checked)
        } catch {
            throw StoreError(error.message, hint: "every directory on the way to the page's files must be writable only by "
                + "you or root (`chmod go-w DIR` on yours); or copy the page to such a directory and give it to "
                + "`speakbridge serve --web-root`")
        }
    }

    /// Rule 3.
    private static func checkFile(_ path: String, _ info: stat) throws(StoreError) {
        let type = info.st_mode & S_IFMT
        guard type == S_IFREG else {
            let what = type == S_IFLNK ? "a symbolic link" : type == S_IFIFO ? "a FIFO" : "not a regular file"
            throw StoreError("\(path) is \(what); the page's directory may hold only regular files and directories",
                             hint: "remove it (`rm \(path)`), or copy the file itself there; if you did not put it there, someone may have tried to serve their own page")
        }
        guard info.st_uid == 0 || info.st_uid == geteuid() else {
            throw PrivatePath.ownedByOther(path, uid: info.st_uid, what: "is a file of the page")
        }
        let mode = info.st_mode & 0o7777
        guard mode & 0o022 == 0 else {
            throw StoreError("\(path) is writable by other users (mode \(String(mode, radix: 8))), who could change the page the browser device runs",
                             hint: "check what is in it, then `chmod go-w \(path)`")
        }
    }

    private static func currentDirectory() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return "/" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
