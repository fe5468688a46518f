import SpeakBridgeSupport
@testable import SpeakBridgeProtocol
import Testing

@Suite("held and error codes")
struct HeldAndErrorCodeTests {
    @Test("held round-trips in the documented form")
    func heldWire() throws {
        let notice = HeldNotice(session: "s-1", seq: 12, sink: "clipboard", reason: "xclip: Can't open display :57")
        let wire = String(decoding: MessageCodec.encode(.held(notice)), as: UTF8.self)
        #expect(wire == #"{"type":"held","session":"s-1","seq":12,"sink":"clipboard","reason":"xclip: Can't open display :57"}"#)
        #expect(try MessageCodec.decode(Array(wire.utf8)) == .held(notice))
    }

    @Test("held with a bad session, seq 0, a reason over 512 bytes or no sink does not decode")
    func heldBounds() {
        for bad in [#"{"type":"held","session":"a/b","seq":1,"sink":"x","reason":""}"#,
                    #"{"type":"held","session":"s","seq":0,"sink":"x","reason":""}"#,
                    #"{"type":"held","session":"s","seq":1,"reason":""}"#,
                    #"{"type":"held","session":"s","seq":1,"sink":"x","reason":""# + String(repeating: "r", count: 513) + #""}"#] {
            #expect(throws: MessageError.self, "\(bad.prefix(60))") { try MessageCodec.decode(Array(bad.utf8)) }
        }
    }

    @Test("the reason is one line of safe text, at most 512 bytes, cut on a scalar boundary")
    func sanitized() {
        #expect(HeldNotice.sanitizedReason("  a\n\u{1B}[2Jb\u{202E}c\t ") == "a [2Jb c")
        let long = HeldNotice.sanitizedReason(String(repeating: "é", count: 300))
        #expect(long.utf8.count == 512 && long.unicodeScalars.allSatisfy { $0 == "é" })
    }

    @Test("an error code this side does not know still decodes, kept as received; known codes map to their case")
    func otherCodes() throws {
        let wire = Array(#"{"type":"error","code":"from-the-future","message":"x"}"#.utf8)
        #expect(try MessageCodec.decode(wire) == .error(code: .other("from-the-future"), message: "x", expected: nil))
        #expect(ProtocolErrorCode(rawValue: "too-many-sessions") == .tooManySessions)
        #expect(ProtocolErrorCode(rawValue: "internal") == .internalError)
        for code in ProtocolErrorCode.known { #expect(ProtocolErrorCode(rawValue: code.rawValue) == code) }
        #expect(String(decoding: MessageCodec.encode(.error(code: .other("x-y"), message: "", expected: nil)), as: UTF8.self)
                == #"{"type":"error","code":"x-y","message":""}"#)
    }

    @Test("close reasons: the close code a client sees and the one counter each adds to")
    func closeReasons() throws {
        let device = try DeviceID(parsing: "AAAA-BBBB-CCCC-DDDD")
        #expect(CloseReason.bye(device).tally == .normal && CloseReason.bye(device).closeCode.code == 1000)
        #expect(CloseReason.rejected(.unknownDevice).tally == .rejected && CloseReason.rejected(.unknownDevice).closeCode.code == 1000)
        #expect(CloseReason.rejected(.revoked(device)).closeCode.code == 1008)
        #expect(CloseReason.pairingFailed("x").tally == .pairingFailure)
        #expect(CloseReason.failed(.overloaded(device)).closeCode.code == 1013)
        #expect(CloseReason.failed(.cannotSavePairing("x")).closeCode.code == 1011)
        #expect(CloseReason.failed(.peerError(device, .gap, "t")).tally == .error)
        #expect(CloseReason.bye(device).description.hasSuffix(" said bye"))
    }
}
