// Exactly-once delivery from the page (PROTOCOL.md, "Sessions and exactly-once delivery", client rules):
// every chunk is stored in IndexedDB before it is sent and kept until acknowledged; each connection starts with
// `resume` and resends every chunk above `delivered`, in order; acks are cumulative; reconnects back off from
// 0.2 s to 5 s; no ack progress for 15 s with chunks in flight closes and reconnects.
//
// States reported per chunk (onChunkState(seq, state, detail)): queued → sent → delivered, or held (with the
// reason, when the desktop says a sink holds it).
import { Connection } from './protocol.js';

const MAX_BATCH = 512;
const MAX_BATCH_BYTES = 60000;
const ACK_STALL_MS = 15000;

function randomSessionID() {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return 's-' + Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

export function newSession() {
  return { id: randomSessionID(), nextSeq: 1, acked: 0, startedAt: Date.now() };
}

export class Sender {
  constructor({ store, desktop, keys, session, agent, events }) {
    this.store = store;
    this.desktop = desktop;
    this.keys = keys;
    this.session = session;
    this.agent = agent;
    this.events = events; // {onChunkState, onConnection(state, detail), onRevoked(reason)}
    this.pending = new Map(); // seq → chunk, not yet acked (mirror of the IndexedDB outbox)
    this.connection = null;
    this.ready = false; // resumed on the current connection
    this.backoff = 200;
    this.stopped = false;
    this.refusals = 0;
    this.stallTimer = null;
    this.held = false; // a sink holds chunks (desktop's `held` notice) until the next ack
    this.appendChain = Promise.resolve();
  }

  async start() {
    for (const chunk of await this.store.outbox()) {
      if (chunk.seq > this.session.acked) {
        this.pending.set(chunk.seq, chunk);
        this.events.onChunkState(chunk, 'queued');
      }
    }
    this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.stallTimer);
    if (this.connection) this.connection.close();
  }

  /** Adds one chunk: durable first, then sent if connected. Resolves once stored. */
  add({ text, lang, start, end }) {
    // After a revoke nothing more is stored or sent.
    if (this.stopped) return Promise.reject(new Error('revoked'));
    const work = this.appendChain.then(async () => {
      const chunk = { seq: this.session.nextSeq, text, final: true };
      if (lang) chunk.lang = String(lang).slice(0, 35);
      if (Number.isFinite(start) && start >= 0) chunk.start = Math.round(start * 1000) / 1000;
      if (Number.isFinite(end) && end >= 0) chunk.end = Math.round(end * 1000) / 1000;
      this.session.nextSeq = chunk.seq + 1;
      try {
        await this.store.addChunk(chunk);
      } catch (error) {
        this.session.nextSeq = chunk.seq; // not stored: the number is free again
        throw error;
      }
      this.pending.set(chunk.seq, chunk);
      this.events.onChunkState(chunk, 'queued');
      if (this.ready) this.transmit([chunk]);
      return chunk;
    });
    this.appendChain = work.catch(() => {});
    return work;
  }

  /** Seconds since this session began (for start/end). */
  elapsed(ms = Date.now()) { return Math.max(0, (ms - (this.session.startedAt || ms)) / 1000); }

  connect() {
    if (this.stopped) return;
    this.events.onConnection('connecting');
    const connection = new Connection({ desktop: this.desktop, keys: this.keys, agent: this.agent });
    this.connection = connection;
    connection.onWelcome = () => {
      this.refusals = 0;
      this.backoff = 200;
      connection.send({ type: 'resume', session: this.session.id }).catch(() => {});
    };
    connection.onMessage = (message) => this.receive(connection, message);
    connection.onClose = ({ code, reason, welcomed }) => this.closed(connection, code, reason, welcomed);
  }

  receive(connection, message) {
    if (connection !== this.connection) return;
    switch (message.type) {
      case 'resume':
        if (message.session !== this.session.id) return;
        this.acknowledge(Number(message.delivered) || 0).then(() => {
          this.ready = true;
          this.events.onConnection('connected');
          this.transmit([...this.pending.values()].sort((a, b) => a.seq - b.seq));
        });
        break;
      case 'ack':
        if (message.session !== this.session.id) return;
        this.acknowledge(Number(message.seq) || 0);
        break;
      case 'held': {
        // {"type":"held","session","seq","sink","reason"}: sink `sink` has not taken `seq` and what follows
        // (the desktop keeps them; they are delivered, and acked, once the sink works again).
        if (message.session !== this.session.id) return;
        const from = Number(message.seq);
        const reason = [message.sink, message.reason].filter((x) => typeof x === 'string' && x).join(': ');
        for (const [seq, chunk] of this.pending) {
          if (seq >= from) this.events.onChunkState(chunk, 'held', reason);
        }
        // No ack is coming while a sink holds them: that is not a dead connection, so no stall reconnect.
        this.held = true;
        clearTimeout(this.stallTimer);
        break;
      }
      case 'error':
        this.events.onConnection('error', String(message.message || message.code || 'error'));
        break;
      default:
        break; // unknown types are ignored (a newer desktop)
    }
  }

  /** Chunks up to `seq` are in every sink and durable: forget them. Lower acks than we have are ignored. */
  async acknowledge(seq) {
    // The level moves before the await, so a lower ack arriving meanwhile is ignored, never written after it.
    if (seq <= this.session.acked) return;
    this.session.acked = seq;
    this.held = false;
    await this.store.ack(seq);
    for (const [s, chunk] of [...this.pending]) {
      if (s <= seq) {
        this.pending.delete(s);
        this.events.onChunkState(chunk, 'delivered');
      }
    }
    this.armStallTimer();
  }

  transmit(chunks) {
    if (!chunks.length || !this.connection) return;
    const connection = this.connection;
    let batch = [];
    let bytes = 0;
    const flush = () => {
      if (!batch.length) return;
      const items = batch;
      batch = [];
      bytes = 0;
      const message = items.length === 1
        ? { type: 'chunk', session: this.session.id, ...items[0] }
        : { type: 'chunks', session: this.session.id, chunks: items };
      connection.send(message).then(() => {
        for (const c of items) if (this.pending.has(c.seq)) this.events.onChunkState(c, 'sent', '', { unlessHeld: true });
      }).catch(() => {});
    };
    for (const chunk of chunks) {
      const size = JSON.stringify(chunk).length + 1;
      if (batch.length >= MAX_BATCH || bytes + size > MAX_BATCH_BYTES) flush();
      batch.push(chunk);
      bytes += size;
    }
    flush();
    this.armStallTimer();
  }

  armStallTimer() {
    clearTimeout(this.stallTimer);
    if (!this.pending.size || !this.ready || this.held) return;
    const connection = this.connection;
    this.stallTimer = setTimeout(() => {
      if (connection === this.connection && this.pending.size) connection.close();
    }, ACK_STALL_MS);
  }

  closed(connection, code, reason, welcomed) {
    if (connection !== this.connection) return;
    this.ready = false;
    this.held = false;
    clearTimeout(this.stallTimer);
    for (const chunk of this.pending.values()) this.events.onChunkState(chunk, 'queued');
    if (code === 1008 && reason === 'revoked') {
      this.stopped = true;
      this.events.onRevoked('the desktop revoked this device');
      return;
    }
    if (!welcomed) this.refusals += 1;
    if (this.refusals >= 3) {
      // A session the desktop ends before any answer: unknown key, revoked while the page was away, or down.
      this.events.onConnection('refused');
    } else {
      this.events.onConnection('reconnecting');
    }
    const delay = this.backoff;
    this.backoff = Math.min(this.backoff * 2, 5000);
    this.reconnectTimer = setTimeout(() => this.connect(), delay);
  }
}
