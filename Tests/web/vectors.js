// Replays, in the browser, the page's Noise initiator (Web/noise.js) against
//   - the published AESGCM vectors (shared/vectors/noise/cacophony_IK_IKpsk1_IKpsk2_AESGCM.json): IK, IKpsk1, IKpsk2,
//     byte for byte (message 1, message 2's payload, transport messages both ways, handshake hash), plus the
//     wrong-psk check;
//   - the protocol's own AESGCM handshakes (Pairing/vectors/handshakes-aesgcm.json), including the per-pair psk;
// and the pairing code parser (Web/pairing-code.js) against Pairing/vectors/pairing-codes.json.
// Results go to window.__results = {passed, failures[]} for the driver (vectors.py).
import { NoiseInitiator, importPrivateKey, unhex, hex, rfcHKDF } from '/Web/noise.js';
import { parsePairingCode, PairingCodeError } from '/Web/pairing-code.js';
import { Log } from '/Web/log.js';

const failures = [];
let passed = 0;
function check(condition, what) { if (condition) passed++; else failures.push(what); }

async function replayCacophony(v, flipPSK = false) {
  const pattern = v.protocol_name.split('_')[1];
  const psk = v.init_psks && v.init_psks.length ? unhex(v.init_psks[0]) : null;
  if (psk && flipPSK) psk[0] ^= 1;
  const noise = new NoiseInitiator({ pattern, prologue: unhex(v.init_prologue), s: await importPrivateKey(unhex(v.init_static)),
    rs: unhex(v.init_remote_static), psk, e: await importPrivateKey(unhex(v.init_ephemeral)) });
  const m = v.messages;
  const m1 = await noise.writeMessage1(unhex(m[0].payload));
  if (flipPSK && pattern === 'IKpsk1') return hex(m1) !== m[0].ciphertext; // the responder rejects message 1
  if (flipPSK) { // IKpsk2: the initiator rejects message 2
    try { await noise.readMessage2(unhex(m[1].ciphertext)); return false; } catch { return true; }
  }
  check(hex(m1) === m[0].ciphertext, `${v.protocol_name}: message 1`);
  const p2 = await noise.readMessage2(unhex(m[1].ciphertext));
  check(hex(p2) === m[1].payload, `${v.protocol_name}: message 2 payload`);
  check(hex(noise.handshakeHash) === v.handshake_hash, `${v.protocol_name}: handshake hash`);
  const t = await noise.split();
  for (let i = 2; i < m.length; i++) {
    if (i % 2 === 0) {
      check(hex(await t.send.encrypt(unhex(m[i].payload))) === m[i].ciphertext, `${v.protocol_name}: transport ${i}`);
    } else {
      check(hex(await t.receive.decrypt(unhex(m[i].ciphertext))) === m[i].payload, `${v.protocol_name}: transport ${i}`);
    }
  }
  return true;
}

async function replayOurs(doc) {
  check(doc.protocol_name === 'Noise_IKpsk1_25519_AESGCM_SHA256', 'protocol name');
  for (const hs of doc.handshakes) {
    const noise = new NoiseInitiator({ pattern: 'IKpsk1', prologue: unhex(hs.prologue),
      s: await importPrivateKey(unhex(hs.client_static_private)), rs: unhex(hs.desktop_static_public),
      psk: unhex(hs.psk), e: await importPrivateKey(unhex(hs.client_ephemeral_private)) });
    const enc = new TextEncoder();
    const m = hs.messages;
    check(hex(await noise.writeMessage1(enc.encode(m[0].payload))) === m[0].message, `${hs.name}: message 1`);
    check(new TextDecoder().decode(await noise.readMessage2(unhex(m[1].message))) === m[1].payload, `${hs.name}: message 2`);
    check(hex(noise.handshakeHash) === hs.handshake_hash, `${hs.name}: handshake hash`);
    const t = await noise.split();
    for (const step of m.slice(2)) {
      if (step.direction === 'client->desktop') {
        check(hex(await t.send.encrypt(enc.encode(step.payload))) === step.message, `${hs.name}: ${step.description}`);
      } else {
        check(new TextDecoder().decode(await t.receive.decrypt(unhex(step.message))) === step.payload,
          `${hs.name}: ${step.description}`);
      }
    }
    if (hs.session_psk) {
      const psk = await rfcHKDF(unhex(hs.psk), unhex(hs.handshake_hash), enc.encode(hs.session_psk_label));
      check(hex(psk) === hs.session_psk, `${hs.name}: per-pair psk`);
    }
  }
}

function codes(doc) {
  for (const v of doc.valid) {
    try {
      const c = parsePairingCode(v.code);
      check(hex(c.desktopKey) === v.fields.public_key && hex(c.secret) === v.fields.secret && c.expiry === v.fields.expiry
        && c.port === v.fields.port && c.addresses.length === v.fields.addresses.length, `code ${v.name}`);
    } catch (e) { failures.push(`code ${v.name}: ${e.message}`); }
  }
  for (const v of doc.variants) {
    try { parsePairingCode(v.code); passed++; } catch (e) { failures.push(`variant ${v.description}: ${e.message}`); }
  }
  for (const v of doc.invalid) {
    try { parsePairingCode(v.code); failures.push(`invalid ${v.description}: accepted`); } catch (e) {
      check(e instanceof PairingCodeError && e.code === v.error, `invalid ${v.description}: ${e.code} (want ${v.error})`);
    }
  }
  for (const v of doc.expiry) {
    let error = null;
    try { parsePairingCode(v.code, v.now); } catch (e) { error = e.code; }
    check(error === v.error, `expiry ${v.description}: ${error}`);
  }
}

// #sb-log: one element per chunk, states as the sender reports them; a held chunk keeps its reason until it is
// delivered; a late 'sent' never takes back 'held' or 'delivered'; at most the last 500 are kept.
function logStates() {
  const list = document.createElement('ol');
  const log = new Log(list);
  log.update({ seq: 1, text: 'one' }, 'queued');
  log.update({ seq: 1, text: 'one' }, 'held', 'fifo: no reader');
  log.update({ seq: 1, text: 'one' }, 'sent', '', { unlessHeld: true });
  const item = list.querySelector('li');
  check(item.dataset.state === 'held' && item.querySelector('.reason').textContent === 'fifo: no reader', 'log: held stays');
  log.update({ seq: 1, text: 'one' }, 'delivered');
  log.update({ seq: 1, text: 'one' }, 'queued');
  check(item.dataset.state === 'delivered' && !item.querySelector('.reason'), 'log: delivered stays, reason gone');
  log.update({ seq: 2, text: '<b>not html</b>' }, 'queued');
  check(list.querySelectorAll('b').length === 0, 'log: text is text');
  for (let i = 3; i < 700; i++) log.update({ seq: i, text: `l${i}` }, 'queued');
  check(list.children.length === 500 && list.firstChild.dataset.seq === '200', 'log: the last 500 kept');
}

async function main() {
  logStates();
  const load = async (url) => (await fetch(url)).json();
  const cacophony = await load('/shared/vectors/noise/cacophony_IK_IKpsk1_IKpsk2_AESGCM.json');
  for (const v of cacophony.vectors) {
    await replayCacophony(v);
    if (v.init_psks && v.init_psks.length) check(await replayCacophony(v, true), `${v.protocol_name}: a wrong psk fails where the pattern says`);
  }
  await replayOurs(await load('/Pairing/vectors/handshakes-aesgcm.json'));
  codes(await load('/Pairing/vectors/pairing-codes.json'));
}

main().catch((e) => failures.push(`exception: ${e.stack || e}`)).finally(() => {
  window.__results = { passed, failures };
  document.getElementById('out').textContent = JSON.stringify(window.__results, null, 1);
});
