#if canImport(Glibc)
import Glibc
#endif

/// X display numbers for tests that need a display nobody else takes: a dead one (no server), or one whose server the
/// test stops while a tool still points at it. `Xvfb -displayfd`, which the other suites use, takes the lowest free
/// number, so a low number freed by a stopped server is soon served again by another suite, and the tool reaches
/// that live display (seen: xclip "succeeding" without an X server). Numbers from 300 up stay out of its way.
public enum ChosenDisplay {
    /// A display number from 300 up with no server socket.
    public static func unused() -> Int {
        var number = 300 + Int.random(in: 0..<200)
        while access("/tmp/.X11-unix/X\(number)", F_OK) == 0 { number += 1 }
        return number
    }

    /// Whether a server listens (or once listened) on `number`: its socket exists.
    public static func hasSocket(_ number: Int) -> Bool {
        access("/tmp/.X11-unix/X\(number)", F_OK) == 0
    }

    /// Removes what an Xvfb killed on `number` leaves behind, its socket and lock file: a later `unused()` would
    /// skip that number for good. Only for a server of the caller's that was listening there.
    public static func removeLeftovers(_ number: Int) {
        unlink("/tmp/.X11-unix/X\(number)")
        unlink("/tmp/.X\(number)-lock")
    }
}
