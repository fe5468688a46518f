// The TLS listener (service thread only): a second lws vhost on the same context, with a certificate, a
// read-only file mount at "/" and extra response headers; and the per-connection info other threads may read.
//
// Flow:
// 1. The vhost "web" is created either with the context (createContext, when the configuration has `secure`) or
//    later, on demand: `startSecure` (any thread) queues a request, the service thread takes it from the inbox and
//    `run()` creates the vhost once the current `lws_service` call has returned (outside any lws callback); the
//    asking thread waits for the result, bounded. Either way `createSecureVhost` binds its own port with the same
//    protocols (so WSS upgrades take the same path through ServiceLoop+Server.swift) and HTTP/1.1 only (ALPN),
//    since the upgrade checks read HTTP/1 headers.
// 2. OpenSSL is touched only there. The context is created WITHOUT LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT: in lws
//    4.1 that option makes lws_create_context initialise OpenSSL (OPENSSL_init_ssl: its config, providers and
//    error strings, about 2 MiB resident, measured) whether a TLS vhost ever comes or not. The vhost's own creation
//    info carries the option, which is what makes lws give it an SSL_CTX; OpenSSL 3 initialises itself at that
//    first SSL_CTX_new. The one consequence of the context lacking the option: lws's ex-data indexes for SSL and
//    SSL_CTX are never allocated and stay 0, OpenSSL's "app data" slot, which nothing else in this process uses;
//    lws sets and reads them with that same index, so they stay consistent (the WSS tests and the browser e2e run
//    through them). lws frees the vhost's SSL_CTX with the vhost whatever the option (__lws_vhost_destroy2).
// 3. A vhost that fails (port taken, certificate unreadable) is destroyed inside lws_create_vhost at once (no wsi
//    is bound to it yet: the bind or the TLS set-up is what failed), its SSL_CTX with it, so the memory it pointed
//    at is released right away and a later attempt starts afresh.
internal import CLibWebSockets
import Dispatch
import SpeakBridgeSupport
#if canImport(Glibc)
import Glibc
#endif

/// A request for the TLS listener, from the thread that waits for it to the service thread.
final class SecureStartRequest: Sendable {
    let configuration: SecureListenerConfiguration
    private let result = Locked<Result<Int, WebSocketError>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(_ configuration: SecureListenerConfiguration) {
        self.configuration = configuration
    }

    /// Service thread (or the loop's teardown): the outcome, once.
    func finish(_ outcome: Result<Int, WebSocketError>) {
        let first = result.withLock { stored in
            guard stored == nil else { return false }
            stored = outcome
            return true
        }
        if first { done.signal() }
    }

    /// The asking thread: the outcome, or nil when none came within `seconds`.
    func wait(seconds: Double) -> Result<Int, WebSocketError>? {
        let nanoseconds = Int(max(0, min(seconds, 3600)) * 1_000_000_000)
        _ = done.wait(timeout: .now() + .nanoseconds(nanoseconds))
        return result.withLock { $0 }
    }
}

/// What lws keeps pointers to while the TLS vhost lives (C-LIBRARY-NOTES §1 pitfall 12).
struct SecureVhostMemory {
    var strings: [UnsafeMutablePointer<CChar>] = []
    var mount: UnsafeMutablePointer<lws_http_mount>?
    var headers: UnsafeMutablePointer<lws_protocol_vhost_options>?
    var headerCount = 0

    mutating func keep(_ text: String) -> UnsafePointer<CChar> {
        let copy = strdup(text)!
        strings.append(copy)
        return UnsafePointer(copy)
    }

    mutating func release() {
        mount?.deinitialize(count: 1)
        mount?.deallocate()
        mount = nil
        headers?.deinitialize(count: headerCount)
        headers?.deallocate()
        headers = nil
        headerCount = 0
        for string in strings { free(string) }
        strings = []
    }
}

extension ServiceLoop {
    /// Any thread but the service thread: the TLS listener's port, creating the listener first unless it exists.
    /// Waits at most `timeout` seconds for the service thread.
    func startSecure(_ secure: SecureListenerConfiguration, timeout: Double) throws(WebSocketError) -> Int {
        guard !isServiceThread else {
            throw .invalidConfiguration("startSecureListener cannot wait on the server's own thread (inside onEvent)")
        }
        let port = securePort.load(ordering: .acquiring)
        if port != 0 { return port }
        let request = SecureStartRequest(secure)
        guard enqueue(.startSecure(request)) else { throw .stopped }
        guard let outcome = request.wait(seconds: timeout) else { throw .timedOut(seconds: timeout) }
        return try outcome.get()
    }

    /// `run()`, between two `lws_service` calls: creates the TLS vhost for the requests queued meanwhile (the first
    /// that succeeds binds it; the others get its port).
    func createPendingSecureVhosts(_ context: OpaquePointer) {
        while !pendingSecureStarts.isEmpty {
            let requests = pendingSecureStarts
            pendingSecureStarts = []
            for request in requests {
                request.finish(secureListener(context, request.configuration))
            }
        }
    }

    private func secureListener(_ context: OpaquePointer, _ secure: SecureListenerConfiguration) -> Result<Int, WebSocketError> {
        guard !stopRequested else { return .failure(.stopped) }
        let existing = securePort.load(ordering: .acquiring)
        if existing != 0 { return .success(existing) }
        guard case let .server(configuration) = role else {
            return .failure(.invalidConfiguration("only a server has a TLS listener"))
        }
        // Counted as a callback: lws calls back from inside lws_create_vhost (protocol init, the SSL_CTX hand-over),
        // and the commands those callbacks would drain must wait until lws_create_vhost has returned.
        let created = withCallbackScope {
            createSecureVhost(context, secure, host: configuration.host, configuration: configuration)
        }
        if case let .success(port) = created {
            securePort.store(port, ordering: .releasing)
        }
        return created
    }

    func createSecureVhost(_ context: OpaquePointer, _ secure: SecureListenerConfiguration, host: String,
                           configuration: WebSocketServerConfiguration) -> Result<Int, WebSocketError> {
        var memory = SecureVhostMemory()
        var info = lws_context_creation_info()
        info.vhost_name = memory.keep("web")
        info.port = Int32(secure.port)
        switch IPLiteral(host) {
        case .v4:
            info.options |= UInt64(LWS_SERVER_OPTION_DISABLE_IPV6)
            if host != "0.0.0.0" { info.iface = memory.keep(host) }
        case .v6:
            if host != "::" { info.iface = memory.keep(host) }
        case nil:
            return .failure(.invalidConfiguration("host \"\(host)\" is not an IP literal"))
        }
        info.options |= UInt64(LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND)
        // lws reads this per vhost: without it the vhost gets no SSL_CTX and speaks plain HTTP (flow, step 2).
        info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
        info.protocols = UnsafePointer(protocols)
        info.timeout_secs = UInt32(configuration.handshakeTimeout)
        info.retry_and_idle_policy = UnsafePointer(retryPolicy)
        info.ssl_cert_filepath = memory.keep(secure.certificatePath)
        info.ssl_private_key_filepath = memory.keep(secure.privateKeyPath)
        // HTTP/2 would carry WebSocket upgrades as CONNECT streams, which the upgrade checks do not read.
        info.alpn = memory.keep("http/1.1")
        info.keepalive_timeout = 2
        if let root = secure.documentRoot {
            let mount = UnsafeMutablePointer<lws_http_mount>.allocate(capacity: 1)
            mount.initialize(to: lws_http_mount())
            mount.pointee.mountpoint = memory.keep("/")
            mount.pointee.mountpoint_len = 1
            mount.pointee.origin = memory.keep(root)
            mount.pointee.def = memory.keep("index.html")
            mount.pointee.origin_protocol = UInt8(LWSMPRO_FILE.rawValue)
            // The page is small and changes with the binary: always revalidate.
            mount.pointee.cache_max_age = 0
            memory.mount = mount
            info.mounts = UnsafePointer(mount)
        }
        if !secure.headers.isEmpty {
            // A singly linked list, as lws wants it: each entry points at the next.
            let count = secure.headers.count
            let list = UnsafeMutablePointer<lws_protocol_vhost_options>.allocate(capacity: count)
            list.initialize(repeating: lws_protocol_vhost_options(), count: count)
            for (index, header) in secure.headers.enumerated() {
                list[index].name = memory.keep(header.name)
                list[index].value = memory.keep(header.value)
                list[index].next = index + 1 < count ? UnsafePointer(list + index + 1) : nil
            }
            memory.headers = list
            memory.headerCount = count
            info.headers = UnsafePointer(list)
        }
        let (vhost, lines) = WebSocketLog.capturingLines({ lws_create_vhost(context, &info) },
                                                          forward: { $0 != nil })
        guard let vhost else {
            // lws destroyed the vhost already (flow, step 3): nothing points at its memory any more.
            memory.release()
            let detail = ServiceLoop.describeCreationFailure(lines.map(\.1))
            return .failure(.bindFailed(host: host, port: secure.port, reason: detail))
        }
        secureMemory.append(memory)
        return .success(Int(lws_get_vhost_listen_port(vhost)))
    }

    /// After lws_context_destroy (or a failed context): what the TLS vhost pointed at.
    func releaseSecureMemory() {
        for index in secureMemory.indices { secureMemory[index].release() }
        secureMemory = []
    }

    /// Records what the application may ask about an accepted connection (before `.opened` goes out).
    func recordInfo(_ id: WebSocketConnectionID, _ wsi: OpaquePointer) {
        let name = lws_get_protocol(wsi).flatMap { $0.pointee.name.map { String(cString: $0) } } ?? ""
        let agent = header(wsi, WSI_TOKEN_HTTP_USER_AGENT).map { String(decoding: Array($0.utf8.prefix(256)), as: UTF8.self) } ?? ""
        let info = WebSocketConnectionInfo(subprotocol: name, isSecure: lws_is_ssl(wsi) != 0, userAgent: agent)
        connectionInfo.withLock { $0[id] = info }
    }
}
