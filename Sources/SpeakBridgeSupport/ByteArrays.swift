#if canImport(Glibc)
import Glibc
#endif

/// Byte arrays whose size is known only at run time, made without the standard library's generic allocation path
/// when they are short. `Array(unsafeUninitializedCapacity:)` and `Array(repeating:count:)` both allocate through
/// `Array._allocateBufferUninitialized`, which is not inlinable and so never specialized: each call looks the
/// `_ContiguousArrayStorage<UInt8>` metadata up in the runtime's cache (about 330 of its 530 instructions, and some
/// 30 lines of the runtime's code, cold after every sleep). `Array(UnsafeBufferPointer)` allocates through inlined,
/// specialized code: a short array is written on the stack and copied (a `memcpy` of at most `stackLimit` bytes).
/// Measured on a paced line: each message sealed or opened once (README → Experiments, eighteenth session). The stack
/// copy is zeroed (`explicit_bzero`) once the array has it: an opened message can be a config transfer's API key, and
/// nothing of it should stay behind in the thread's stack.
public enum ByteArrays {
    /// The longest array written on the stack first; a longer one is allocated uninitialized (one metadata lookup
    /// per array that long is noise beside filling it).
    public static let stackLimit = 4_096

    /// A new array of the first `body(buffer)` bytes `body` writes into `capacity` uninitialized bytes (it returns
    /// how many it initialized, from the start: 0 when it failed).
    @inlinable
    public static func make(capacity: Int, _ body: (UnsafeMutableBufferPointer<UInt8>) -> Int) -> [UInt8] {
        precondition(capacity >= 0, "a byte array's capacity is not negative")
        if capacity <= stackLimit {
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Swift.max(capacity, 1)) { whole in
                let buffer = UnsafeMutableBufferPointer(rebasing: whole[0..<capacity])
                let count = body(buffer)
                precondition(count >= 0 && count <= capacity, "at most the capacity initialized")
                let bytes = [UInt8](UnsafeBufferPointer(rebasing: buffer[0..<count]))
                if let base = whole.baseAddress { explicit_bzero(base, whole.count) }
                return bytes
            }
        }
        return [UInt8](unsafeUninitializedCapacity: capacity) { buffer, initialized in
            let count = body(buffer)
            precondition(count >= 0 && count <= capacity, "at most the capacity initialized")
            initialized = count
        }
    }
}
