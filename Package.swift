// swift-tools-version: 6.0
// SpeakBridge: dictation from a phone (or any program) to a Linux desktop, privately, over the LAN.
//
// Layout (dependencies point inward):
//   support leaf    SpeakBridgeSupport (Locked, Hex, PeerText escaping, Console over swift-log)
//   C leaves        CSodium, CLibWebSockets, CQREncode, CAvahi, CSecret — each imported by exactly one Swift target
//   adapters        SpeakBridgeCrypto (libsodium + Noise), SpeakBridgeWebSocket (lws), SpeakBridgeQR (qrencode),
//                   SpeakBridgeDiscovery (avahi), SpeakBridgeKeyring (libsecret),
//                   SpeakBridgeSinks (stdout, FIFO, jsonl, transcript files, clipboard, typing)
//   pure core       SpeakBridgeProtocol (pairing code, messages, session state machines; no sockets, no files)
//   persistence     SpeakBridgeStore (home layout, identity, peers, outbox journal)
//   delivery        SpeakBridgeDelivery (pipeline, sink threads, progress log: where exactly-once is decided)
//                   SpeakBridgeConfig (typed preferences and secrets, HLC versions, merge, consent policy)
//   desktop core    SpeakBridgeDesktopCore (ledgers, pairing code, connections: events in, actions out)
//   client core     SpeakBridgeClientCore (the client role as a value: dial, handshake, outbox window, resume)
//   control seam    SpeakBridgeControl (typed CLI ↔ daemon requests and replies, the control socket)
//   roles           SpeakBridgeDaemon (serve: a shell around the desktop core),
//                   SpeakBridgeClient (join, send, config: shells around the client core)
//   wiring          speakbridge (argument parsing only)
import PackageDescription

// glib's glibconfig.h lives in the multiarch library directory. `pkg-config --cflags glib-2.0` names it, but a
// `pkgConfig:` on CSecret would also link glib into every process, which SpeakBridgeKeyring now loads only on first
// use (dlopen); so the Debian multiarch path is spelled out here for the one target that needs it.
#if arch(x86_64)
let multiarch = "x86_64-linux-gnu"
#elseif arch(arm64)
let multiarch = "aarch64-linux-gnu"
#elseif arch(arm)
let multiarch = "arm-linux-gnueabihf"
#elseif arch(riscv64)
let multiarch = "riscv64-linux-gnu"
#else
let multiarch = "unknown-linux-gnu"
#endif

let package = Package(
    name: "SpeakBridge",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "speakbridge", targets: ["speakbridge"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
    ],
    targets: [
        // C leaves
        .systemLibrary(name: "CSodium", path: "Sources/CSodium",
                       pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CLibWebSockets", path: "Sources/CLibWebSockets",
                       pkgConfig: "libwebsockets", providers: [.apt(["libwebsockets-dev"])]),
        // No pkgConfig: it would link libqrencode, which SpeakBridgeQR dlopens on first use (qrencode.h is in /usr/include).
        .systemLibrary(name: "CQREncode", path: "Sources/CQREncode", providers: [.apt(["libqrencode-dev"])]),
        // OpenSSL (libssl-dev; libwebsockets already links it for TLS): the browser route's web certificate.
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL", providers: [.apt(["libssl-dev"])]),
        // No pkgConfig here: avahi-client.pc adds -D_REENTRANT, which SwiftPM drops with a warning on every build.
        // The headers are in /usr/include; the modulemap links nothing (SpeakBridgeDiscovery dlopens
        // libavahi-client.so.3 on first use); `make` installs libavahi-client-dev.
        .systemLibrary(name: "CAvahi", path: "Sources/CAvahi"),
        // No pkgConfig either: libsecret-1.pc (through gio-2.0) adds -pthread, which SwiftPM drops with a warning,
        // and glib-2.0.pc would link glib. The include paths (libsecret, glib, and glib's multiarch glibconfig.h;
        // see `multiarch` above) go to the single target that imports CSecret. The modulemap links nothing:
        // SpeakBridgeKeyring dlopens libsecret on first use.
        .systemLibrary(name: "CSecret", path: "Sources/CSecret", providers: [.apt(["libsecret-1-dev"])]),

        // the support leaf: small types every layer may use (no C, no Foundation): the lock, hex, peer-text escaping,
        // and the Console facade over swift-log
        .target(name: "SpeakBridgeSupport", dependencies: [.product(name: "Logging", package: "swift-log")]),

        // adapters over the C leaves
        .target(name: "SpeakBridgeCrypto", dependencies: ["CSodium", "SpeakBridgeSupport"]),
        .target(name: "SpeakBridgeWebSocket", dependencies: ["CLibWebSockets", "SpeakBridgeSupport", "SpeakBridgeCrypto",
                                                       .product(name: "DequeModule", package: "swift-collections")]),
        .target(name: "SpeakBridgeQR", dependencies: ["CQREncode", "SpeakBridgeSupport"]),
        .target(name: "SpeakBridgeTLS", dependencies: ["COpenSSL", "SpeakBridgeStore", "SpeakBridgeCrypto"]),
        .target(name: "SpeakBridgeDiscovery", dependencies: ["CAvahi", "SpeakBridgeSupport"]),
        .target(name: "SpeakBridgeSinks", dependencies: ["SpeakBridgeProtocol", "SpeakBridgeSupport", "SpeakBridgeStore"]),
        .target(name: "SpeakBridgeKeyring", dependencies: ["CSecret", "SpeakBridgeSupport"],
                swiftSettings: [.unsafeFlags(["-Xcc", "-I/usr/include/libsecret-1", "-Xcc", "-I/usr/include/glib-2.0",
                                              "-Xcc", "-I/usr/lib/\(multiarch)/glib-2.0/include"])]),

        // pure protocol core
        .target(name: "SpeakBridgeProtocol", dependencies: ["SpeakBridgeCrypto", "SpeakBridgeSupport"]),
        // the client role as a value (dialing, handshake, outbox window, resume, refusals, timeouts): no sockets,
        // no files, no threads — it cannot import them
        .target(name: "SpeakBridgeClientCore", dependencies: ["SpeakBridgeProtocol", "SpeakBridgeCrypto", "SpeakBridgeSupport"]),

        // persistence and roles
        .target(name: "SpeakBridgeStore", dependencies: [
            "SpeakBridgeProtocol", "SpeakBridgeCrypto", "SpeakBridgeSupport",
        ]),
        .target(name: "SpeakBridgeConfig", dependencies: [
            "SpeakBridgeProtocol", "SpeakBridgeStore", "SpeakBridgeCrypto", "SpeakBridgeKeyring", "SpeakBridgeSupport",
        ]),
        // the desktop's sans-IO core: events in, actions out (no sockets, files, threads or clock)
        .target(name: "SpeakBridgeDesktopCore", dependencies: ["SpeakBridgeProtocol", "SpeakBridgeCrypto", "SpeakBridgeSupport"]),
        // the CLI ↔ daemon control seam: typed requests and replies, and the Unix-socket transport
        .target(name: "SpeakBridgeControl", dependencies: ["SpeakBridgeProtocol", "SpeakBridgeStore", "SpeakBridgeSupport"]),
        .target(name: "SpeakBridgeDelivery", dependencies: [
            "SpeakBridgeProtocol", "SpeakBridgeStore", "SpeakBridgeSinks", "SpeakBridgeSupport",
            .product(name: "DequeModule", package: "swift-collections"),
        ]),
        .target(name: "SpeakBridgeDaemon", dependencies: [
            "SpeakBridgeProtocol", "SpeakBridgeCrypto", "SpeakBridgeStore", "SpeakBridgeWebSocket",
            "SpeakBridgeSinks", "SpeakBridgeDiscovery", "SpeakBridgeDesktopCore", "SpeakBridgeControl", "SpeakBridgeSupport",
            "SpeakBridgeDelivery", "SpeakBridgeTLS",
        ]),
        .target(name: "SpeakBridgeClient", dependencies: [
            "SpeakBridgeClientCore", "SpeakBridgeProtocol", "SpeakBridgeCrypto", "SpeakBridgeStore", "SpeakBridgeWebSocket",
            "SpeakBridgeDiscovery", "SpeakBridgeConfig", "SpeakBridgeSupport",
        ]),

        // wiring
        .executableTarget(name: "speakbridge", dependencies: [
            "SpeakBridgeDaemon", "SpeakBridgeClient", "SpeakBridgeStore", "SpeakBridgeProtocol", "SpeakBridgeQR",
            "SpeakBridgeConfig", "SpeakBridgeSinks", "SpeakBridgeControl", "SpeakBridgeSupport", "SpeakBridgeDelivery",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),

        // the generator of Pairing/vectors/ (checked in `make test`)
        .executableTarget(name: "speakbridge-vectors", dependencies: [
                              "SpeakBridgeProtocol", "SpeakBridgeCrypto", "SpeakBridgeSupport", "SpeakBridgeConfig",
                              "SpeakBridgeStore",
                          ],
                          path: "Sources/VectorGenerator"),

        // examples that always compile
        .executableTarget(name: "InMemorySession", dependencies: ["SpeakBridgeProtocol", "SpeakBridgeCrypto"],
                          path: "Examples/InMemorySession"),
        .executableTarget(name: "HandshakeWalkthrough", dependencies: ["SpeakBridgeProtocol", "SpeakBridgeCrypto"],
                          path: "Examples/HandshakeWalkthrough"),

        // libFuzzer targets for every parser a peer reaches (Fuzz/README.md; built only by `make fuzz`, in
        // .build-fuzz, with -sanitize=fuzzer,address; in a normal build each links with an empty main)
        .executableTarget(name: "FuzzPairingCode", dependencies: ["SpeakBridgeProtocol"],
                          path: "Fuzz/Targets/FuzzPairingCode"),
        .executableTarget(name: "FuzzJSON", dependencies: ["SpeakBridgeProtocol"], path: "Fuzz/Targets/FuzzJSON"),
        .executableTarget(name: "FuzzMessageCodec", dependencies: ["SpeakBridgeProtocol"],
                          path: "Fuzz/Targets/FuzzMessageCodec"),
        .executableTarget(name: "FuzzConfigWire", dependencies: ["SpeakBridgeConfig", "SpeakBridgeProtocol"],
                          path: "Fuzz/Targets/FuzzConfigWire"),
        .executableTarget(name: "FuzzResponder", dependencies: ["SpeakBridgeProtocol", "SpeakBridgeCrypto"],
                          path: "Fuzz/Targets/FuzzResponder"),
        .executableTarget(name: "FuzzMessageReassembler", dependencies: ["SpeakBridgeWebSocket"],
                          path: "Fuzz/Targets/FuzzMessageReassembler"),

        // tests (SpeakBridgeTestSupport: helpers shared by test targets, e.g. spawning children with a clean signal mask)
        .target(name: "SpeakBridgeTestSupport", dependencies: ["SpeakBridgeSupport"], path: "Tests/SpeakBridgeTestSupport"),
        .testTarget(name: "SpeakBridgeCryptoTests", dependencies: ["SpeakBridgeCrypto", "SpeakBridgeSupport"]),
        .testTarget(name: "SpeakBridgeProtocolTests", dependencies: [
            "SpeakBridgeProtocol", "SpeakBridgeCrypto", "SpeakBridgeSupport", "SpeakBridgeTestSupport",
        ]),
        .testTarget(name: "SpeakBridgeClientCoreTests", dependencies: [
            "SpeakBridgeClientCore", "SpeakBridgeDesktopCore", "SpeakBridgeProtocol", "SpeakBridgeCrypto",
        ]),
        .testTarget(name: "SpeakBridgeWebSocketTests", dependencies: [
            "SpeakBridgeWebSocket", "SpeakBridgeSupport", "SpeakBridgeTestSupport",
        ]),
        .testTarget(name: "SpeakBridgeSinksTests", dependencies: [
            "SpeakBridgeSinks", "SpeakBridgeQR", "SpeakBridgeSupport", "SpeakBridgeDelivery", "SpeakBridgeProtocol",
            "SpeakBridgeStore", "SpeakBridgeTestSupport",
        ]),
        .testTarget(name: "SpeakBridgeDeliveryTests", dependencies: [
            "SpeakBridgeDelivery", "SpeakBridgeSinks", "SpeakBridgeProtocol", "SpeakBridgeStore", "SpeakBridgeCrypto",
            "SpeakBridgeSupport", "SpeakBridgeTestSupport",
        ]),
        .testTarget(name: "SpeakBridgeDiscoveryTests", dependencies: ["SpeakBridgeDiscovery", "SpeakBridgeTestSupport", "SpeakBridgeSupport"]),
        .testTarget(name: "SpeakBridgeStoreTests", dependencies: [
            "SpeakBridgeStore", "SpeakBridgeProtocol", "SpeakBridgeControl", "SpeakBridgeDelivery", "SpeakBridgeSupport",
            "SpeakBridgeTestSupport", .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "SpeakBridgeDesktopCoreTests", dependencies: [
            "SpeakBridgeDesktopCore", "SpeakBridgeProtocol", "SpeakBridgeCrypto", "SpeakBridgeSupport",
        ]),
        .testTarget(name: "SpeakBridgeControlTests", dependencies: [
            "SpeakBridgeControl", "SpeakBridgeProtocol", "SpeakBridgeSupport", "SpeakBridgeTestSupport",
        ]),
        .testTarget(name: "SpeakBridgeTLSTests", dependencies: ["SpeakBridgeTLS", "SpeakBridgeStore"]),
        .testTarget(name: "SpeakBridgeConfigTests", dependencies: ["SpeakBridgeConfig", "SpeakBridgeProtocol", "SpeakBridgeStore"]),
        .testTarget(name: "SpeakBridgeKeyringTests", dependencies: [
            "SpeakBridgeKeyring", "SpeakBridgeConfig", "SpeakBridgeStore", "SpeakBridgeProtocol", "SpeakBridgeTestSupport",
        ]),
        // `send`'s quick option reading against the argument parser (tests the executable's module)
        .testTarget(name: "SpeakBridgeCLITests", dependencies: [
            "speakbridge", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .testTarget(name: "EndToEndTests", dependencies: [
            "SpeakBridgeProtocol", "SpeakBridgeStore", "SpeakBridgeCrypto", "SpeakBridgeWebSocket", "SpeakBridgeSupport",
            "SpeakBridgeDelivery", "SpeakBridgeConfig", "SpeakBridgeTestSupport",
        ]),
    ],
    swiftLanguageModes: [.v6]
)
