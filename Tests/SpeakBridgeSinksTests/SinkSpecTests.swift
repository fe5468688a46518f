import Testing
import SpeakBridgeSinks

@Suite struct SinkSpecTests {
    @Test func parsesEveryValidForm() throws {
        let cases: [(String, SinkSpec)] = [
            ("stdout", .stdout),
            ("fifo:/run/user/1000/dictation", .fifo(path: "/run/user/1000/dictation")),
            ("fifo:relative/with:colon", .fifo(path: "relative/with:colon")),
            ("jsonl:/run/user/1000/speakbridge.jsonl", .jsonl(path: "/run/user/1000/speakbridge.jsonl")),
            ("clipboard", .clipboard(primary: false)),
            ("clipboard:primary", .clipboard(primary: true)),
            ("type", .type(pressEnter: false)),
            ("type:enter", .type(pressEnter: true)),
        ]
        for (text, spec) in cases {
            #expect(try SinkSpec(parsing: text) == spec)
            #expect(spec.description == text)
        }
    }

    @Test(arguments: ["", "stdout:", "fifo:", "clipboard:secondary", "type:return", "exec", "FIFO:/x"])
    func rejectsWithTheValidForms(_ text: String) {
        do {
            _ = try SinkSpec(parsing: text)
            Issue.record("'\(text)' was accepted")
        } catch let error as SinkError {
            let advice = error.message + " " + (error.hint ?? "")
            #expect(advice.contains("fifo:PATH"), "\(error)")
            if text != "fifo:" { #expect(advice.contains("clipboard:primary") && advice.contains("type:enter")) }
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test func aPathSinkWithoutItsPathSaysHowToWriteIt() {
        for kind in ["fifo", "jsonl"] {
            #expect(throws: SinkError.self) { try SinkSpec(parsing: "\(kind):") }
            do { _ = try SinkSpec(parsing: "\(kind):") } catch let error as SinkError {
                #expect(error.message.contains("needs a path") && error.hint?.contains("\(kind):PATH") == true)
            } catch {}
        }
    }
}
