// The only file that talks to libqrencode (the CQREncode C leaf).
internal import CQREncode
import SpeakBridgeSupport
#if canImport(Glibc)
private import Glibc
#elseif canImport(Darwin)
private import Darwin
#endif

/// A QR code symbol: its version and its module matrix (`true` = dark module), without quiet zone.
public struct QRSymbol: Sendable, Equatable {
    /// QR version, 1...40. The symbol is `17 + 4 * version` modules wide.
    public let version: Int
    /// Rows of modules, top to bottom; each row left to right. Square, `17 + 4 * version` on a side.
    public let modules: [[Bool]]

    /// Width (and height) in modules.
    public var size: Int { modules.count }

    /// Error correction level of the symbol.
    public let level: QRErrorCorrection

    /// Encodes `text` as UTF-8 with error correction level `level` (default M) in the smallest version that holds it.
    ///
    /// libqrencode splits the input into segments and picks the cheapest mode for each (numeric, alphanumeric,
    /// 8-bit), case-sensitively, so a pairing code made of the QR alphanumeric set gets the small alphanumeric
    /// encoding while any other text still encodes (as 8-bit bytes).
    public init(encoding text: String, level: QRErrorCorrection = .medium) throws(QRError) {
        try self.init(encoding: text, level: level, minimumVersion: 0)
    }

    /// The smallest symbol for `text`: the smallest version at level L, then the strongest error correction that
    /// still fits that version (a terminal has little room, and a screen is not a scratched label).
    public static func smallest(encoding text: String) throws(QRError) -> QRSymbol {
        let low = try QRSymbol(encoding: text, level: .low)
        for level in [QRErrorCorrection.high, .quartile, .medium] {
            if let stronger = try? QRSymbol(encoding: text, level: level, minimumVersion: low.version),
               stronger.version == low.version {
                return stronger
            }
        }
        return low
    }

    /// `minimumVersion` 0 lets libqrencode choose; otherwise it takes that version or a larger one if needed.
    private init(encoding text: String, level: QRErrorCorrection, minimumVersion: Int) throws(QRError) {
        if text.utf8.contains(0) { throw .containsNUL }
        if text.isEmpty { throw .empty }
        let qr: sb_qrencode_api
        switch LibQREncode.shared {
        case .success(let loaded): qr = loaded
        case .failure(let missing): throw .libraryMissing(missing)
        }
        // libqrencode sets errno and returns NULL on failure; its result must be freed with QRcode_free.
        let (code, err): (UnsafeMutablePointer<QRcode>?, Int32) = text.withCString { cString in
            let code = qr.QRcode_encodeString(cString, Int32(minimumVersion), level.libqrencode, QR_MODE_8, 1)
            return (code, errno)  // read at once: errno is only meaningful right after the failing call
        }
        guard let code else {
            throw err == ERANGE ? .tooLong(bytes: text.utf8.count) : .encodingFailed(errno: err)
        }
        defer { qr.QRcode_free(code) }
        let width = Int(code.pointee.width)
        let version = Int(code.pointee.version)
        guard width == 17 + 4 * version, let data = code.pointee.data else {
            throw .encodingFailed(errno: 0)
        }
        // Why unsafe: `data` is libqrencode's width*width byte array, alive until QRcode_free above.
        // Bit 0 of each byte is the module colour (1 = dark); the other bits describe the module's role.
        let bytes = UnsafeBufferPointer(start: data, count: width * width)
        var rows: [[Bool]] = []
        rows.reserveCapacity(width)
        for y in 0..<width {
            rows.append((0..<width).map { x in bytes[y * width + x] & 1 == 1 })
        }
        self.version = version
        self.level = level
        self.modules = rows
    }
}

/// QR error correction levels: about 7 %, 15 %, 25 % and 30 % of the symbol may be damaged.
public enum QRErrorCorrection: Sendable, Equatable, CaseIterable {
    case low, medium, quartile, high

    var libqrencode: QRecLevel {
        switch self {
        case .low: QR_ECLEVEL_L
        case .medium: QR_ECLEVEL_M
        case .quartile: QR_ECLEVEL_Q
        case .high: QR_ECLEVEL_H
        }
    }
}

/// Why a text could not be turned into a QR code.
public enum QRError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The text contains a NUL character, which libqrencode's string API cannot carry.
    case containsNUL
    /// The text is empty.
    case empty
    /// The text does not fit into a version-40 symbol at error correction level M.
    case tooLong(bytes: Int)
    /// libqrencode failed for another reason (errno as it reported it, 0 if it returned a malformed symbol).
    case encodingFailed(errno: Int32)
    /// libqrencode cannot be loaded (it is opened on first use, not linked).
    case libraryMissing(SharedLibraryError)

    public var description: String {
        switch self {
        case .containsNUL: "text for QR code contains a NUL character"
        case .empty: "text for QR code is empty"
        case .tooLong(let bytes): "text of \(bytes) bytes is too long for a QR code"
        case .encodingFailed(let err): "QR encoding failed (errno \(err))"
        case .libraryMissing(let error): error.fullDescription
        }
    }
}
