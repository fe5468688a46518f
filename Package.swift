// swift-tools-version: 6.0
// SpeakBridge: dictation from a phone (or any program) to a Linux desktop, privately, over the LAN.
//
// Layout (dependencies point inward):
//   support leaf    SpeakBridgeSupport (Locked: the one lock type, a pthread mutex TSan can see)
//   C leaves        CSodium, CLibWebSockets, CQREncode, CAvahi, CSecret — each imported by exactly one Swift target
//   adapters        SpeakBridgeCrypto (libsodium + Noise), SpeakBridgeWebSocket (lws), SpeakBridgeQR (qrencode),
//                   SpeakBridgeDiscovery (avahi), SpeakBridgeKeyring (libsecret),
//                   SpeakBridgeSinks (stdout, FIFO, jsonl, transcript files, clipboard, typing)
//   pure core       SpeakBridgeProtocol (pairing code, messages, session state machines; no sockets, no files)
//   persistence     SpeakBridgeStore (home layout, identity, peers, outbox journal, control socket)
//   delivery        SpeakBridgeDelivery (pipeline, sink threads, progress log: where exactly-once is decided)
//                   SpeakBridgeConfig (typed preferences and secrets, HLC versions, merge, consent policy)
//   roles           SpeakBridgeDaemon (serve), SpeakBridgeClient (join, send)
//   wiring          speakbridge (argument parsing only)
import PackageDescription

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
        .systemLibrary(name: "CQREncode", path: "Sources/CQREncode",
                       pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),
        // No pkgConfig here: avahi-client.pc adds -D_REENTRANT, which SwiftPM drops with a warning on every build.
        // The headers are in /usr/include and the modulemap links the libraries; `make` installs libavahi-client-dev.
        .systemLibrary(name: "CAvahi", path: "Sources/CAvahi"),
        // libsecret-1.pc (through gio-2.0) adds -pthread, which SwiftPM drops with a warning whenever it plans the
        // build. So pkg-config is asked for glib-2.0 only (the architecture-specific glib include path, no
        // -pthread), and the one libsecret include path, the same on every architecture, is added to the single
        // target that imports CSecret. The modulemap links libsecret, gio, gobject and glib.
        .systemLibrary(name: "CSecret", path: "Sources/CSecret",
                       pkgConfig: "glib-2.0", providers: [.apt(["libsecret-1-dev"])]),

        // the support leaf: small types every layer may use (no C, no Foundation)
        .target(name: "SpeakBridgeSupport"),

        // adapters over the C leaves
        .target(name: "SpeakBridgeCrypto", dependencies: ["CSodium", "SpeakBridgeSupport"]),
        .target(name: "SpeakBridgeWebSocket", dependencies: ["CLibWebSockets", "SpeakBridgeSupport"]),
        .target(name: "SpeakBridgeQR", dependencies: ["CQREncode"]),
        .target(name: "SpeakBridgeDiscovery", dependencies: ["CAvahi", "SpeakBridgeSupport"]),
        .target(name: "SpeakBridgeSinks", dependencies: ["SpeakBridgeProtocol", "SpeakBridgeSupport", "SpeakBridgeStore"]),
        .target(name: "SpeakBridgeKeyring", dependencies: ["CSecret"],
                swiftSettings: [.unsafeFlags(["-Xcc", "-I/usr/include/libsecret-1"])]),

        // pure protocol core
        .target(name: "SpeakBridgeProtocol", dependencies: ["SpeakBridgeCrypto"]),

        // persistence and roles
        .target(name: "SpeakBridgeStore", dependencies: [
            "SpeakBridgeProtocol", "SpeakBridgeCrypto", .product(name: "Logging", package: "swift-log"),
        ]),
        .target(name: "SpeakBridgeConfig", dependencies: [
            "SpeakBridgeProtocol", "SpeakBridgeStore", "SpeakBridgeCrypto", "SpeakBridgeKeyring",
        ]),
        .target(name: "SpeakBridgeDelivery", dependencies: [
            "SpeakBridgeProtocol", "SpeakBridgeStore", "SpeakBridgeSinks", "SpeakBridgeSupport",
            .product(name: "DequeModule", package: "swift-collections"),
        ]),
        .target(name: "SpeakBridgeDaemon", dependencies: [
            "SpeakBridgeProtocol", "SpeakBridgeCrypto", "SpeakBridgeStore", "SpeakBridgeWebSocket",
            "SpeakBridgeSinks", "SpeakBridgeQR", "SpeakBridgeDiscovery", "SpeakBridgeDelivery",
        ]),
        .target(name: "SpeakBridgeClient", dependencies: [
            "SpeakBridgeProtocol", "SpeakBridgeCrypto", "SpeakBridgeStore", "SpeakBridgeWebSocket",
            "SpeakBridgeDiscovery", "SpeakBridgeConfig",
        ]),

        // wiring
        .executableTarget(name: "speakbridge", dependencies: [
            "SpeakBridgeDaemon", "SpeakBridgeClient", "SpeakBridgeStore", "SpeakBridgeProtocol", "SpeakBridgeQR",
            "SpeakBridgeConfig", "SpeakBridgeSinks", "SpeakBridgeDelivery",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),

        // the generator of Pairing/vectors/ (checked in `make test`)
        .executableTarget(name: "speakbridge-vectors", dependencies: ["SpeakBridgeProtocol", "SpeakBridgeCrypto"],
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
        .testTarget(name: "SpeakBridgeCryptoTests", dependencies: ["SpeakBridgeCrypto"]),
        .testTarget(name: "SpeakBridgeProtocolTests", dependencies: ["SpeakBridgeProtocol", "SpeakBridgeCrypto"]),
        .testTarget(name: "SpeakBridgeWebSocketTests", dependencies: ["SpeakBridgeWebSocket", "SpeakBridgeSupport"]),
        .testTarget(name: "SpeakBridgeSinksTests", dependencies: [
            "SpeakBridgeSinks", "SpeakBridgeQR", "SpeakBridgeSupport", "SpeakBridgeDelivery", "SpeakBridgeProtocol",
            "SpeakBridgeStore",
        ]),
        .testTarget(name: "SpeakBridgeDeliveryTests", dependencies: [
            "SpeakBridgeDelivery", "SpeakBridgeSinks", "SpeakBridgeProtocol", "SpeakBridgeStore", "SpeakBridgeCrypto",
            "SpeakBridgeSupport",
        ]),
        .testTarget(name: "SpeakBridgeDiscoveryTests", dependencies: ["SpeakBridgeDiscovery", "SpeakBridgeTestSupport", "SpeakBridgeSupport"]),
        .testTarget(name: "SpeakBridgeStoreTests", dependencies: [
            "SpeakBridgeStore", "SpeakBridgeProtocol", "SpeakBridgeDelivery", .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "SpeakBridgeConfigTests", dependencies: ["SpeakBridgeConfig", "SpeakBridgeProtocol", "SpeakBridgeStore"]),
        .testTarget(name: "SpeakBridgeKeyringTests", dependencies: [
            "SpeakBridgeKeyring", "SpeakBridgeConfig", "SpeakBridgeStore", "SpeakBridgeProtocol", "SpeakBridgeTestSupport",
        ]),
        .testTarget(name: "EndToEndTests", dependencies: [
            "SpeakBridgeProtocol", "SpeakBridgeStore", "SpeakBridgeCrypto", "SpeakBridgeWebSocket", "SpeakBridgeDelivery",
        ]),
    ],
    swiftLanguageModes: [.v6]
)
