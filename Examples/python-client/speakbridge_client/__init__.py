"""An independent SpeakBridge protocol v1 client, written from Pairing/PROTOCOL.md."""
