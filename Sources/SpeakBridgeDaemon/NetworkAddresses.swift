#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeProtocol

/// The addresses a pairing code should carry for a daemon listening on `host`.
enum NetworkAddresses {
    static func forListening(host: String) -> [PairingAddress] {
        if host != "0.0.0.0" && host != "::" && !host.isEmpty {
            return PairingAddress(host).map { [$0] } ?? []
        }
        var result: [PairingAddress] = []
        var loopback: [PairingAddress] = []
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        var cursor = list
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard let sa = entry.pointee.ifa_addr, Int32(entry.pointee.ifa_flags) & Int32(IFF_UP) != 0 else { continue }
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            let family = Int32(sa.pointee.sa_family)
            if family == AF_INET {
                sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    var a = sin.pointee.sin_addr
                    _ = inet_ntop(AF_INET, &a, &buffer, socklen_t(buffer.count))
                }
            } else if family == AF_INET6, host == "::" {
                var linkLocal = false
                sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                    var a = sin6.pointee.sin6_addr
                    linkLocal = sin6.pointee.sin6_scope_id != 0
                    _ = inet_ntop(AF_INET6, &a, &buffer, socklen_t(buffer.count))
                }
                if linkLocal { continue }
            } else {
                continue
            }
            let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard let address = PairingAddress(text) else { continue }
            if Int32(entry.pointee.ifa_flags) & Int32(IFF_LOOPBACK) != 0 {
                loopback.append(address)
            } else if !result.contains(address) {
                result.append(address)
            }
        }
        return Array((result + loopback).prefix(PairingCode.maxAddresses))
    }
}
