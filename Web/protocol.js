// The SpeakBridge protocol over WSS from the page (Pairing/PROTOCOL.md), with the AESGCM cipher selected by the
// subprotocol `speakbridge.v1.aesgcm`. The page always dials its own origin (the daemon serves both).
//
//   pair(): /speakbridge.v1/pair — message 1 {pair} → message 2 {pair-accept} → {pair-confirm} → {paired};
//           the per-pair psk = HKDF(secret, handshake hash, "speakbridge.v1 session psk").
//   Connection: /speakbridge.v1/session — message 1 {hello} → message 2 {welcome}, then transport messages.
// Frames leave in encryption order (one promise chain per direction), as the Noise counter nonce requires.
import { NoiseInitiator, NoiseError, rfcHKDF, concat } from './noise.js';

export const SUBPROTOCOL = 'speakbridge.v1.aesgcm';
const enc = new TextEncoder();
const dec = new TextDecoder('utf-8', { fatal: true });

export function endpoint(path) {
  return `wss://${location.host}${path}`;
}

export function encodeMessage(message) { return enc.encode(JSON.stringify(message)); }

export function decodeMessage(bytes) {
  const value = JSON.parse(dec.decode(bytes));
  if (typeof value !== 'object' || value === null || typeof value.type !== 'string') throw new Error('no type');
  return value;
}

export class PairingError extends Error {
  constructor(kind, detail) { super(detail); this.kind = kind; }
}

/** Pairs with the desktop of `code`; resolves {psk, name, id, handshakeHash}. */
export function pair({ code, keys, name, url = endpoint('/speakbridge.v1/pair'), timeoutMs = 15000 }) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, SUBPROTOCOL);
    ws.binaryType = 'arraybuffer';
    const noise = new NoiseInitiator({ prologue: enc.encode('speakbridge.v1 pair'), s: keys, rs: code.desktopKey,
      psk: code.secret });
    let step = 0;
    let transport = null;
    let accepted = null;
    let done = false;
    let chain = Promise.resolve();
    const finish = (error, value) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      try { ws.close(1000); } catch { /* already closed */ }
      if (error) reject(error); else resolve(value);
    };
    const timer = setTimeout(() => finish(new PairingError('timeout', 'the desktop did not answer in time')), timeoutMs);
    ws.onopen = () => {
      chain = chain.then(async () => {
        ws.send(await noise.writeMessage1(encodeMessage({ type: 'pair', name })));
      }).catch((e) => finish(new PairingError('crypto', String(e))));
    };
    ws.onmessage = (event) => {
      const frame = new Uint8Array(event.data);
      chain = chain.then(async () => {
        if (step === 0) {
          const reply = decodeMessage(await noise.readMessage2(frame));
          if (reply.type !== 'pair-accept') throw new PairingError('protocol', `unexpected ${reply.type}`);
          accepted = { name: String(reply.name || ''), id: String(reply.id || ''), hash: noise.handshakeHash };
          transport = await noise.split();
          step = 1;
          ws.send(await transport.send.encrypt(encodeMessage({ type: 'pair-confirm' })));
        } else if (step === 1) {
          const reply = decodeMessage(await transport.receive.decrypt(frame));
          if (reply.type === 'error') throw new PairingError('refused', String(reply.message || reply.code));
          if (reply.type !== 'paired') throw new PairingError('protocol', `unexpected ${reply.type}`);
          step = 2;
          const psk = await rfcHKDF(code.secret, accepted.hash, enc.encode('speakbridge.v1 session psk'));
          finish(null, { psk, name: accepted.name, id: accepted.id });
        }
      }).catch((e) => finish(e instanceof PairingError ? e : new PairingError(
        e instanceof NoiseError ? 'impostor' : 'protocol', String(e.message || e))));
    };
    ws.onerror = () => {};
    ws.onclose = (event) => {
      if (done) return;
      if (step === 0 && event.code === 1008) {
        finish(new PairingError('inactive', 'the desktop shows no pairing code right now'));
      } else if (step === 0 && event.code === 1006 && !accepted && ws.protocol === '') {
        finish(new PairingError('unreachable', 'the desktop could not be reached'));
      } else {
        finish(new PairingError('refused', `closed (${event.code})`));
      }
    };
  });
}

/**
 * One session connection. Events: onWelcome(), onMessage(message), onClose({code, reason, welcomed}).
 * send(message) encrypts and sends in call order.
 */
export class Connection {
  constructor({ desktop, keys, agent, url = endpoint('/speakbridge.v1/session') }) {
    this.ws = new WebSocket(url, SUBPROTOCOL);
    this.ws.binaryType = 'arraybuffer';
    this.noise = new NoiseInitiator({ prologue: enc.encode('speakbridge.v1 session'), s: keys, rs: desktop.key,
      psk: desktop.psk });
    this.transport = null;
    this.rxChain = Promise.resolve();
    this.txChain = Promise.resolve();
    this.welcomed = false;
    this.closed = false;
    this.onWelcome = () => {};
    this.onMessage = () => {};
    this.onClose = () => {};
    this.ws.onopen = () => {
      this.txChain = this.txChain.then(async () => {
        this.ws.send(await this.noise.writeMessage1(encodeMessage({ type: 'hello', agent })));
      }).catch(() => this.close());
    };
    this.ws.onmessage = (event) => {
      const frame = new Uint8Array(event.data);
      this.rxChain = this.rxChain.then(async () => {
        if (this.closed) return;
        if (!this.transport) {
          const reply = decodeMessage(await this.noise.readMessage2(frame));
          if (reply.type !== 'welcome') throw new Error(`expected welcome, got ${reply.type}`);
          this.transport = await this.noise.split();
          this.welcomed = true;
          this.onWelcome();
          return;
        }
        const plain = await this.transport.receive.decrypt(frame);
        let message;
        try { message = decodeMessage(plain); } catch { return; } // ignore what cannot be parsed
        this.onMessage(message);
      }).catch(() => this.close());
    };
    this.ws.onerror = () => {};
    this.ws.onclose = (event) => {
      if (this.closed) return;
      this.closed = true;
      this.onClose({ code: event.code, reason: event.reason, welcomed: this.welcomed });
    };
  }

  send(message) {
    const bytes = encodeMessage(message);
    const sent = this.txChain.then(async () => {
      if (this.closed || !this.transport) throw new Error('not connected');
      const frame = await this.transport.send.encrypt(bytes);
      this.ws.send(frame);
    });
    this.txChain = sent.catch(() => {});
    return sent;
  }

  close(code = 1000) {
    if (this.closed) return;
    try { this.ws.close(code); } catch { /* ignore */ }
    this.closed = true;
    this.onClose({ code: 1006, reason: 'closed locally', welcomed: this.welcomed });
  }
}

export { concat };
