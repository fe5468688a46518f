import SpeakBridgeSupport
import Testing

/// `ByteArrays.make`: exactly the bytes its body initialized, on both sides of the stack limit.
@Suite("Byte arrays")
struct ByteArraysTests {
    @Test(arguments: [0, 1, 15, 4_095, 4_096, 4_097, 65_536])
    func theInitializedPrefixIsTheArray(capacity: Int) {
        for count in Set([0, capacity / 2, capacity]) {
            let bytes = ByteArrays.make(capacity: capacity) { buffer in
                #expect(buffer.count == capacity)
                for i in 0..<count { buffer[i] = UInt8(truncatingIfNeeded: i &* 7 &+ 3) }
                return count
            }
            #expect(bytes == (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }, "capacity \(capacity)")
        }
    }

    /// Arrays made one after another on the stack path do not share or keep each other's bytes.
    @Test func eachArrayIsItsOwn() {
        let first = ByteArrays.make(capacity: 8) { buffer in
            for i in 0..<8 { buffer[i] = 0xAA }
            return 8
        }
        let second = ByteArrays.make(capacity: 8) { buffer in
            buffer[0] = 1
            return 1
        }
        #expect(first == [UInt8](repeating: 0xAA, count: 8))
        #expect(second == [1])
    }
}
