// The TLS listener (service thread only): a second lws vhost on the same context, with a certificate, a
// read-only file mount at "/" and extra response headers; and the per-connection info other threads may read.
//
// Flow: createContext binds the plain vhost ("default") as before, then calls createSecureVhost, which binds
// "web" on its own port with the same protocols (so WSS upgrades take the same path through
// ServiceLoop+Server.swift) and HTTP/1.1 only (ALPN), since the upgrade checks read HTTP/1 headers.
internal import CLibWebSockets
#if canImport(Glibc)
import Glibc
#endif

extension ServiceLoop {
    func createSecureVhost(_ context: OpaquePointer, _ secure: SecureListenerConfiguration, host: String,
                           configuration: WebSocketServerConfiguration) -> Result<Int, WebSocketError> {
        var info = lws_context_creation_info()
        info.vhost_name = UnsafePointer(keep("web"))
        info.port = Int32(secure.port)
        switch IPLiteral(host) {
        case .v4:
            info.options |= UInt64(LWS_SERVER_OPTION_DISABLE_IPV6)
            if host != "0.0.0.0" { info.iface = UnsafePointer(keep(host)) }
        case .v6:
            if host != "::" { info.iface = UnsafePointer(keep(host)) }
        case nil:
            return .failure(.invalidConfiguration("host \"\(host)\" is not an IP literal"))
        }
        info.options |= UInt64(LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND)
        // lws reads this per vhost too: without it the vhost ignores its certificate and speaks plain HTTP.
        info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
        info.protocols = UnsafePointer(protocols)
        info.timeout_secs = UInt32(configuration.handshakeTimeout)
        info.retry_and_idle_policy = UnsafePointer(retryPolicy)
        info.ssl_cert_filepath = UnsafePointer(keep(secure.certificatePath))
        info.ssl_private_key_filepath = UnsafePointer(keep(secure.privateKeyPath))
        // HTTP/2 would carry WebSocket upgrades as CONNECT streams, which the upgrade checks do not read.
        info.alpn = UnsafePointer(keep("http/1.1"))
        info.keepalive_timeout = 2
        if let root = secure.documentRoot {
            let mount = UnsafeMutablePointer<lws_http_mount>.allocate(capacity: 1)
            mount.initialize(to: lws_http_mount())
            mount.pointee.mountpoint = UnsafePointer(keep("/"))
            mount.pointee.mountpoint_len = 1
            mount.pointee.origin = UnsafePointer(keep(root))
            mount.pointee.def = UnsafePointer(keep("index.html"))
            mount.pointee.origin_protocol = UInt8(LWSMPRO_FILE.rawValue)
            // The page is small and changes with the binary: always revalidate.
            mount.pointee.cache_max_age = 0
            self.mount = mount
            info.mounts = UnsafePointer(mount)
        }
        if !secure.headers.isEmpty {
            // A singly linked list, as lws wants it: each entry points at the next.
            let count = secure.headers.count
            let list = UnsafeMutablePointer<lws_protocol_vhost_options>.allocate(capacity: count)
            list.initialize(repeating: lws_protocol_vhost_options(), count: count)
            for (index, header) in secure.headers.enumerated() {
                list[index].name = UnsafePointer(keep(header.name))
                list[index].value = UnsafePointer(keep(header.value))
                list[index].next = index + 1 < count ? UnsafePointer(list + index + 1) : nil
            }
            headerOptions = list
            headerOptionCount = count
            info.headers = UnsafePointer(list)
        }
        let (vhost, lines) = WebSocketLog.capturingLines({ lws_create_vhost(context, &info) },
                                                          forward: { $0 != nil })
        guard let vhost else {
            let detail = ServiceLoop.describeCreationFailure(lines.map(\.1))
            return .failure(.bindFailed(host: host, port: secure.port, reason: detail))
        }
        return .success(Int(lws_get_vhost_listen_port(vhost)))
    }

    func releaseSecureMemory() {
        mount?.deinitialize(count: 1)
        mount?.deallocate()
        mount = nil
        headerOptions?.deinitialize(count: headerOptionCount)
        headerOptions?.deallocate()
        headerOptions = nil
        headerOptionCount = 0
    }

    /// Records what the application may ask about an accepted connection (before `.opened` goes out).
    func recordInfo(_ id: WebSocketConnectionID, _ wsi: OpaquePointer) {
        let name = lws_get_protocol(wsi).flatMap { $0.pointee.name.map { String(cString: $0) } } ?? ""
        let agent = header(wsi, WSI_TOKEN_HTTP_USER_AGENT).map { String(decoding: Array($0.utf8.prefix(256)), as: UTF8.self) } ?? ""
        let info = WebSocketConnectionInfo(subprotocol: name, isSecure: lws_is_ssl(wsi) != 0, userAgent: agent)
        connectionInfo.withLock { $0[id] = info }
    }
}
