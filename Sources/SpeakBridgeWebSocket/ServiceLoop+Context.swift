// Creating and releasing the lws context (service thread only): the creation info for the server
// or client role, the memory lws keeps pointers to, and a readable reason when creation fails.
internal import CLibWebSockets
#if canImport(Glibc)
import Glibc
#endif

extension ServiceLoop {
    /// Creates the context on the service thread. For a server the listening socket is
    /// bound when this returns.
    func createContext() -> Result<(context: OpaquePointer, port: Int), WebSocketError> {
        var info = lws_context_creation_info()
        let protocolName: String
        let rxBufferSize = 4096
        let policy = UnsafeMutablePointer<lws_retry_bo_t>.allocate(capacity: 1)
        policy.initialize(to: lws_retry_bo_t())
        retryPolicy = policy
        switch role {
        case let .server(configuration):
            protocolName = configuration.subprotocol
            info.port = Int32(configuration.port)
            switch IPLiteral(configuration.host) {
            case .v4:
                info.options |= UInt64(LWS_SERVER_OPTION_DISABLE_IPV6)
                if configuration.host != "0.0.0.0" {
                    info.iface = UnsafePointer(keep(configuration.host))
                }
            case .v6:
                if configuration.host != "::" {
                    info.iface = UnsafePointer(keep(configuration.host))
                }
            case nil:
                return .failure(.invalidConfiguration("host \"\(configuration.host)\" is not an IP literal"))
            }
            // Without this lws "succeeds" with no listener when it cannot bind (notes §2).
            info.options |= UInt64(LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND)
            // No LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT here, even with a TLS listener: on the context it initialises
            // OpenSSL at once (about 2 MiB resident) whether a TLS vhost comes or not; the TLS vhost carries it in
            // its own creation info instead (ServiceLoop+Secure.swift, flow step 2).
            // Bounds the HTTP part of the upgrade too.
            info.timeout_secs = UInt32(configuration.handshakeTimeout)
            policy.pointee.secs_since_valid_ping = UInt16(configuration.pingInterval)
            policy.pointee.secs_since_valid_hangup = UInt16(configuration.hangupAfter)
            info.retry_and_idle_policy = UnsafePointer(policy)
        case let .client(configuration):
            protocolName = ServiceLoop.clientProtocolName
            info.port = CONTEXT_PORT_NO_LISTEN
            policy.pointee.secs_since_valid_ping = UInt16(configuration.pingInterval)
            policy.pointee.secs_since_valid_hangup = UInt16(configuration.hangupAfter)
        }

        // One entry per accepted subprotocol (lws picks the first one the client offered and echoes its name),
        // all with our callback, and the zeroed terminator lws requires.
        var names = [protocolName]
        if case let .server(configuration) = role { names += configuration.extraSubprotocols }
        let protocols = UnsafeMutablePointer<lws_protocols>.allocate(capacity: names.count + 1)
        protocols.initialize(repeating: lws_protocols(), count: names.count + 1)
        protocolCount = names.count + 1
        for (index, name) in names.enumerated() {
            protocols[index].name = UnsafePointer(keep(name))
            protocols[index].callback = lwsProtocolCallback
            protocols[index].per_session_data_size = 0
            // Bytes per RECEIVE callback: what lws buffers before the size check sees a frame.
            protocols[index].rx_buffer_size = rxBufferSize
            // Without this a send() is capped at rx_buffer_size and lws copies the rest aside.
            protocols[index].tx_packet_size = 128 * 1024
        }
        self.protocols = protocols
        info.protocols = UnsafePointer(protocols)
        info.user = Unmanaged.passUnretained(self).toOpaque()

        // A client context is sized for the descriptors a client can hold, not for the whole soft limit
        // (ClientDescriptorCap); the server's, which holds one per device, for the soft limit as lws does.
        let isClient: Bool
        if case .client = role { isClient = true } else { isClient = false }
        let (created, lines) = WebSocketLog.capturingLines({
            isClient ? ClientDescriptorCap.withLoweredLimit { lws_create_context(&info) } : lws_create_context(&info)
        }, forward: { $0 != nil })
        guard let context = created else {
            let detail = ServiceLoop.describeCreationFailure(lines.map(\.1))
            switch role {
            case let .server(configuration):
                return .failure(.bindFailed(host: configuration.host, port: configuration.port, reason: detail))
            case .client:
                return .failure(.contextCreationFailed(detail))
            }
        }
        guard case let .server(configuration) = role else {
            return .success((context, 0))
        }
        let port = Int(lws_get_vhost_listen_port(lws_get_vhost_by_name(context, "default")))
        if let secure = configuration.secure {
            switch createSecureVhost(context, secure, host: configuration.host, configuration: configuration) {
            case let .success(securePort):
                self.securePort.store(securePort, ordering: .releasing)
            case let .failure(error):
                lws_context_destroy(context)
                return .failure(error)
            }
        }
        return .success((context, port))
    }

    static let clientProtocolName = "speakbridge-client"

    /// lws explains a failed lws_create_context only in its log, e.g.
    /// "ERROR on binding fd 30 to port 46723 (-1 98)". Puts the errno text first.
    static func describeCreationFailure(_ lines: [String]) -> String {
        guard !lines.isEmpty else { return "lws_create_context failed" }
        let joined = lines.joined(separator: "; ")
        if let binding = lines.first(where: { $0.contains("binding") }),
           let open = binding.lastIndex(of: " "), binding.hasSuffix(")"),
           let code = Int32(binding[binding.index(after: open)...].dropLast()), code > 0 {
            return "\(String(decoding: strerrorBytes(code), as: UTF8.self)) (lws: \(joined))"
        }
        return "lws: \(joined)"
    }

    /// A C copy of `text` that lives until the context is destroyed.
    func keep(_ text: String) -> UnsafeMutablePointer<CChar> {
        let copy = strdup(text)!
        cStrings.append(copy)
        return copy
    }

    func releaseContextMemory() {
        protocols?.deinitialize(count: protocolCount)
        protocols?.deallocate()
        protocols = nil
        protocolCount = 0
        releaseSecureMemory()
        retryPolicy?.deinitialize(count: 1)
        retryPolicy?.deallocate()
        retryPolicy = nil
        for string in cStrings {
            free(string)
        }
        cStrings = []
    }
}

private func strerrorBytes(_ code: Int32) -> [UInt8] {
    guard let text = strerror(code) else { return Array("errno \(code)".utf8) }
    return Array(UnsafeBufferPointer(start: text, count: strlen(text))).map { UInt8(bitPattern: $0) }
}
