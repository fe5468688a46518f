// The only test double of the browser tests: a stand-in for the Web Speech API's SpeechRecognition (a real one
// needs a microphone and Google's speech service, neither of which exists here). Injected before the page's own
// scripts. The test drives it with window.__speech.say(text, isFinal).
(() => {
  class FakeRecognition {
    constructor() {
      this.continuous = false;
      this.interimResults = false;
      this.lang = '';
      this.results = [];
    }
    start() { window.__speech.active = this; window.__speech.starts += 1; }
    stop() {
      if (window.__speech.active === this) window.__speech.active = null;
      if (this.onend) this.onend();
    }
    abort() { this.stop(); }
  }
  window.__speech = {
    active: null,
    starts: 0,
    say(text, isFinal) {
      const r = this.active;
      if (!r) return false;
      const last = r.results[r.results.length - 1];
      const index = last && !last.isFinal ? r.results.length - 1 : r.results.length;
      const result = [{ transcript: text, confidence: 0.9 }];
      result.isFinal = isFinal;
      r.results[index] = result;
      if (r.onresult) r.onresult({ resultIndex: index, results: r.results });
      return true;
    },
    config() { const r = this.active; return r && { continuous: r.continuous, interim: r.interimResults, lang: r.lang }; },
  };
  window.SpeechRecognition = FakeRecognition;
  window.webkitSpeechRecognition = FakeRecognition;
})();
