// The Web Speech API (SpeechRecognition): continuous, with interim results. Each final result is handed on
// once, with the time its first words were heard (startMs) and the time it became final (endMs). Browsers stop
// recognition after a silence or a network hiccup: while the user wants to listen, it is started again.
export class Dictation {
  static supported() { return Boolean(window.SpeechRecognition || window.webkitSpeechRecognition); }

  constructor({ onInterim, onFinal, onState }) {
    this.onInterim = onInterim;
    this.onFinal = onFinal;
    this.onState = onState;
    this.listening = false;
    this.recognition = null;
    this.started = new Map(); // result index → ms when first heard
  }

  start(lang) {
    const Recognition = window.SpeechRecognition || window.webkitSpeechRecognition;
    if (!Recognition) { this.onState(false, 'This browser has no speech recognition: use the keyboard\'s mic.'); return; }
    this.listening = true;
    this.lang = lang;
    this.begin(Recognition);
    this.onState(true);
  }

  begin(Recognition) {
    const r = new Recognition();
    r.continuous = true;
    r.interimResults = true;
    r.lang = this.lang;
    this.started.clear();
    r.onresult = (event) => {
      let interim = '';
      for (let i = event.resultIndex; i < event.results.length; i++) {
        const result = event.results[i];
        if (!this.started.has(i)) this.started.set(i, Date.now());
        const text = result[0].transcript;
        if (result.isFinal) {
          this.onFinal({ text, lang: r.lang || this.lang, startMs: this.started.get(i), endMs: Date.now() });
        } else {
          interim += text;
        }
      }
      this.onInterim(interim);
    };
    r.onerror = (event) => {
      if (event.error === 'not-allowed' || event.error === 'service-not-allowed') {
        this.listening = false;
        this.onState(false, 'The microphone is not allowed for this page: allow it in the browser\'s site settings.');
      }
    };
    r.onend = () => {
      if (this.listening) setTimeout(() => { if (this.listening) this.begin(Recognition); }, 250);
      else this.onInterim('');
    };
    this.recognition = r;
    r.start();
  }

  stop() {
    this.listening = false;
    if (this.recognition) { try { this.recognition.stop(); } catch { /* already stopped */ } }
    this.onState(false);
  }
}
