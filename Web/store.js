// What the page keeps in IndexedDB (origin-scoped, survives reloads and restarts of the phone):
//   keys    'static'  the device's X25519 key pair; the private key is a non-extractable CryptoKey
//   state   'desktop' the paired desktop: {key, name, id, psk, codeHash, clientID}; 'session' {id, startedAt};
//           'acked' the session's ack level; 'revoked' true once the desktop revoked this device
//   outbox  seq → {seq, text, lang, start, end, state}: every chunk from the moment it is made until acked
// Each write is one transaction that completes before the caller goes on (durable before it is sent).

const DB_NAME = 'speakbridge';
const VERSION = 1;

function request(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

export class Store {
  static async open() {
    const req = indexedDB.open(DB_NAME, VERSION);
    req.onupgradeneeded = () => {
      const db = req.result;
      db.createObjectStore('keys');
      db.createObjectStore('state');
      db.createObjectStore('outbox', { keyPath: 'seq' });
    };
    return new Store(await request(req));
  }

  constructor(db) { this.db = db; }

  async get(storeName, key) {
    const tx = this.db.transaction(storeName, 'readonly');
    return request(tx.objectStore(storeName).get(key));
  }

  /** Runs `body(stores)` in one read-write transaction over `names`; resolves when it is committed. */
  transact(names, body) {
    return new Promise((resolve, reject) => {
      const tx = this.db.transaction(names, 'readwrite', { durability: 'strict' });
      const stores = Object.fromEntries(names.map((n) => [n, tx.objectStore(n)]));
      let result;
      try { result = body(stores); } catch (e) { tx.abort(); reject(e); return; }
      tx.oncomplete = () => resolve(result);
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error || new Error('transaction aborted'));
    });
  }

  put(storeName, key, value) {
    return this.transact([storeName], (s) => { s[storeName].put(value, key); });
  }

  async outbox() {
    const tx = this.db.transaction('outbox', 'readonly');
    return request(tx.objectStore('outbox').getAll());
  }

  /** Appends a chunk (its seq is the session's next: `loadSession` derives that from the outbox and the ack level). */
  addChunk(chunk) {
    return this.transact(['outbox'], (s) => { s.outbox.add(chunk); });
  }

  /** Forgets chunks up to `seq` (acknowledged) and records the level, in one transaction. */
  ack(seq) {
    return this.transact(['outbox', 'state'], (s) => {
      s.outbox.delete(IDBKeyRange.upperBound(seq));
      s.state.put(seq, 'acked');
    });
  }

  /** The session: {id, startedAt, acked, nextSeq}. nextSeq = 1 + the highest seq ever made, which is the highest
   * in the outbox or, with an empty outbox, the ack level (a chunk leaves the outbox only when it is acked). */
  async loadSession() {
    const session = await this.get('state', 'session');
    if (!session) return null;
    const acked = (await this.get('state', 'acked')) || 0;
    const tx = this.db.transaction('outbox', 'readonly');
    const cursor = await request(tx.objectStore('outbox').openCursor(null, 'prev'));
    const top = cursor ? cursor.key : 0;
    return { id: session.id, startedAt: session.startedAt, acked, nextSeq: Math.max(acked, top) + 1 };
  }

  /** A new pairing: new desktop, a fresh session, an empty outbox, not revoked. */
  paired(desktop, session) {
    return this.transact(['outbox', 'state'], (s) => {
      s.outbox.clear();
      s.state.put(desktop, 'desktop');
      s.state.put({ id: session.id, startedAt: session.startedAt }, 'session');
      s.state.put(0, 'acked');
      s.state.delete('revoked');
    });
  }
}
