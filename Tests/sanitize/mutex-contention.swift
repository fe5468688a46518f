// Reproduces a ThreadSanitizer false positive with Synchronization.Mutex on Linux (Swift 6.3), see tsan.supp:
//   swiftc -sanitize=thread -g Tests/sanitize/mutex-contention.swift -o /tmp/mutex-contention
//   SWIFT_BACKTRACE=enable=no /tmp/mutex-contention
// prints "WARNING: ThreadSanitizer: Swift access race" although every access is inside withLock. Without the
// usleep (no contention, so no futex hand-off) it prints nothing. Not part of any target.
import Foundation
import Synchronization

final class Box: Sendable { let m = Mutex([Int]()) }
let box = Box()
let other = Thread { for i in 0..<300 { box.m.withLock { $0.append(i); usleep(200) } } }
other.start()
for i in 0..<300 { box.m.withLock { $0.append(i); usleep(200) } }
while box.m.withLock({ $0.count }) < 600 { usleep(1000) }
print(box.m.withLock { $0.count })
