// The delivery pipeline and the progress log moved out of this target (and out of SpeakBridgeStore) into
// SpeakBridgeDelivery; re-exported here so the daemon's files keep compiling without an import of their own.
@_exported public import SpeakBridgeDelivery
