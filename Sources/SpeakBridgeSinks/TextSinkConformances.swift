// The tool-based sinks show only the text: class (a) (`DeliveryClass.recordBeforeWrite`), through `TextSink`'s
// adapter. Declared here so their own files keep only what they do.
extension ClipboardSink: TextSink {}
extension TypeSink: TextSink {}
